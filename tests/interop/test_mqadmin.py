"""`mqadmin` as an operator runs it: the installed command against the session's real NameServer and
broker processes (conftest.py), checked by what it prints and its exit status."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.interop.interop_harness import BROKER_NAME, CLUSTER, ServerPair

MQADMIN = Path(sys.executable).parent / "mqadmin"


def mqadmin(servers: ServerPair | None, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "NAMESRV_ADDR"}
    if servers is not None:
        env["NAMESRV_ADDR"] = servers.namesrv_addr
    return subprocess.run([str(MQADMIN), *args], capture_output=True, text=True, timeout=timeout, env=env)


def ok(servers: ServerPair, *args: str) -> str:
    done = mqadmin(servers, *args)
    assert done.returncode == 0, f"mqadmin {' '.join(args)} failed ({done.returncode}):\n{done.stderr}{done.stdout}"
    return done.stdout


def test_send_then_consume_query_and_view(servers: ServerPair) -> None:
    sent = ok(servers, "sendMessage", "-t", "AdminTopic", "-p", "hello from mqadmin", "-c", "TagA", "-k", "admin-key-1")
    assert "SEND_OK" in sent
    offset_id = re.search(r"OffsetMsgId: ([0-9A-F]{32})", sent)
    uniq_id = re.search(r"SEND_OK\s+([0-9A-F]{32})", sent)
    assert offset_id and uniq_id, sent

    consumed = ok(servers, "consumeMessage", "-t", "AdminTopic", "-c", "1")
    assert "Message Body:       hello from mqadmin" in consumed
    assert "Consumed 1 message(s)" in consumed

    by_key = ok(servers, "queryMsgByKey", "-t", "AdminTopic", "-k", "admin-key-1")
    assert offset_id.group(1) in by_key

    by_id = ok(servers, "queryMsgById", "-i", offset_id.group(1))
    assert "hello from mqadmin" in by_id and "[TagA]" in by_id and "[admin-key-1]" in by_id

    by_uniq = ok(servers, "queryMsgByUniqueKey", "-t", "AdminTopic", "-i", uniq_id.group(1))
    assert f"MsgId:              {uniq_id.group(1)}" in by_uniq


def test_cluster_topic_and_broker_views(servers: ServerPair) -> None:
    created = ok(servers, "updateTopic", "-c", CLUSTER, "-t", "AdminCreated", "-r", "2", "-w", "2")
    assert f"create topic to {servers.broker_addr} success." in created

    route = ok(servers, "topicRoute", "-t", "AdminCreated")
    row = next(line for line in route.splitlines() if line.startswith(BROKER_NAME) and line.split()[-1] == "6")
    assert row.split()[1:] == ["2", "2", "6"], route
    assert f"0={servers.broker_addr}" in route

    assert "AdminCreated" in ok(servers, "topicList").split()

    clusters = ok(servers, "clusterList")
    assert re.search(rf"^{CLUSTER}\s+{BROKER_NAME}\s+0\s+{re.escape(servers.broker_addr)}\s", clusters, re.M), clusters

    status = ok(servers, "brokerStatus", "-b", servers.broker_addr)
    assert re.search(r"^brokerVersionDesc\s+: V5_3_3$", status, re.M), status


def test_consumer_progress_shows_lag_of_a_group(servers: ServerPair) -> None:
    for i in range(3):
        ok(servers, "sendMessage", "-t", "AdminLag", "-p", f"m{i}")
    # the group exists once a consumer of it has pulled (consumeMessage commits nothing)
    ok(servers, "consumeMessage", "-t", "AdminLag", "-g", "NobodyCommits", "-c", "1")
    progress = ok(servers, "consumerProgress", "-g", "NobodyCommits", "-t", "AdminLag")
    assert re.search(r"^Consume Diff Total: 3$", progress, re.M), progress


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (("topicList",), 2, "no NameServer address"),  # neither -n nor $NAMESRV_ADDR
        (("noSuchCommand", "-n", "127.0.0.1:1"), 2, "invalid choice"),
        (("topicRoute", "-n", "127.0.0.1:9"), 2, "-t"),  # required flag missing
        (("topicList", "-n", "127.0.0.1:1"), 1, "mqadmin topicList:"),  # nothing listens there
        (("updateTopic", "-n", "127.0.0.1:1", "-t", "T", "-b", "a:1", "-c", "C"), 1, "either -b"),
        (("queryMsgById", "-n", "127.0.0.1:1", "-i", "XYZ"), 1, "offset message id"),
    ],
)
def test_bad_input_gets_a_clear_error_and_exit_status(args: tuple[str, ...], code: int, says: str) -> None:
    done = mqadmin(None, *args, timeout=30)
    assert done.returncode == code, done.stderr
    assert says in done.stderr
    assert "Traceback" not in done.stderr
