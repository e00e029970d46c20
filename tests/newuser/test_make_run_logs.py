"""Logs under `make run`: the servers' own rotated logs in .data/logs keep the earlier runs (a kill -9
included), and a config warning (an unknown key) shows on the terminal, not only in the file.

Runs `make run` in a pseudo-terminal like test_make_run.py, from a copy of conf/broker.conf with a typo
(RUN_BROKER_CONF).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from broker.logs.formats import TEXT_LINE
from tests.newuser.test_make_run import REPO, RUNNING, MakeRun


def _make_run(data: Path, broker_conf: Path) -> MakeRun:
    run = MakeRun(data)
    run.env["RUN_BROKER_CONF"] = str(broker_conf)
    return run


def test_make_run_logs_survive_a_kill_and_a_restart_and_config_warnings_reach_the_terminal(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text((REPO / "conf" / "broker.conf").read_text() + "\nbrokerNmae=typo\n")
    data = tmp_path / "data"
    first = _make_run(data, conf)
    try:
        term = first.start()
        term.wait_output(RUNNING, 120)
        warning = "unknown broker config key 'brokerNmae'"
        assert warning in term.output and term.output.index(warning) < term.output.index(RUNNING)
        os.kill(first.server_pid("mqbroker"), signal.SIGKILL)
        term.wait_output("mqbroker was killed by SIGKILL", 30)
        term.ctrl_c()
        assert term.wait(120) == 0, term.output
    finally:
        first.close()
    second = _make_run(data, conf)
    try:
        term = second.start()
        term.wait_output(RUNNING, 120)
        term.ctrl_c()
        assert term.wait(120) == 0, term.output
        assert "Error" not in term.output
    finally:
        second.close()
    broker_log = (data / "logs" / "broker.log").read_text()
    lines = broker_log.splitlines()
    assert [line for line in lines if not TEXT_LINE.match(line)] == []
    assert broker_log.count("boot success") == 2  # the killed run's lines are still there
    assert broker_log.count(warning) == 2
    after_kill = broker_log[broker_log.index("boot success") :]
    assert "last exit abnormal" in after_kill and "last exit clean" not in after_kill
    assert "shutdown ok" in after_kill
    namesrv_log = (data / "logs" / "namesrv.log").read_text()
    assert namesrv_log.count("The Name Server boot success") == 2  # the logged line (stdout is not the file)
    assert all(TEXT_LINE.match(line) for line in namesrv_log.splitlines())
