"""ACL 2.0 with real peers: our broker and NameServer as processes (mqnamesrv / mqbroker), users and ACLs made
by Java's mqadmin 5.3.3 and by ours, then the Java client 5.3.3 (AclClientRPCHook), the Go client
(primitive.Credentials), the C++ core (rocketmq-python-cvs, set_session_credentials) and our SDK send and
consume with a valid user; a wrong secret, a Deny rule and a NORMAL user's admin request are refused with
NO_PERMISSION while the other clients keep being served."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from broker.cli.mqadmin.main import main as mqadmin_main
from broker.client import Admin, BlockingProducer, ClientConfig, Credentials, Message
from broker.client.admin import auth as admin_auth
from broker.client.errors import NoPermission
from tests.auth.auth_harness import INNER, ROOT, SECURED
from tests.interop.go_harness import ensure_go, go
from tests.interop.interop_harness import CLUSTER, PeerProc, ServerPair, home_for
from tests.interop.java_harness import ensure_java, java
from tests.interop.java_harness import java_mqadmin as run_java_mqadmin
from tests.peers import PEERS

pytestmark = pytest.mark.peers

CVS = "rocketmq-python-cvs-2.1.0.3"
USERS = {"javauser": "javasecret1", "gouser": "gosecret12", "cppuser": "cppsecret1", "sdkuser": "sdksecret1"}


def _home(root: Path, name: str, creds: Credentials | None) -> Path:
    """A ROCKETMQ_HOME whose conf/tools.yml holds `creds` (what mqadmin signs with)."""
    home = root / name
    (home / "conf").mkdir(parents=True, exist_ok=True)
    if creds is not None:
        (home / "conf" / "tools.yml").write_text(f"accessKey: {creds.access_key}\nsecretKey: {creds.secret_key}\n")
    return home


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerPair]:
    root = tmp_path_factory.mktemp("auth-peers")
    pair = ServerPair(root, SECURED)
    pair.start()
    try:
        asyncio.run(_create_topics(pair, ("AuthOk", "AuthDeny", "AuthCpp", "AuthGo")))
        yield pair
    finally:
        pair.stop()


async def _create_topics(pair: ServerPair, topics: tuple[str, ...]) -> None:
    async with Admin(client_config=ClientConfig(namesrv_addr=pair.namesrv_addr, credentials=ROOT)) as admin:
        for topic in topics:
            await admin.create_topic(topic, cluster=CLUSTER, read_queue_nums=2, write_queue_nums=2)
        for _ in range(100):
            if set(topics) <= set(await admin.topic_list()):
                return
            await asyncio.sleep(0.1)


def java_mqadmin(pair: ServerPair, home: Path, *args: str) -> str:
    """RocketMQ 5.3.3's MQAdminStartup, unchanged; it signs with $ROCKETMQ_HOME/conf/tools.yml."""
    return run_java_mqadmin(pair.namesrv_addr, home, *args, env={"ROCKETMQ_HOME": str(home)})


def test_java_mqadmin_creates_a_user_and_an_acl_and_the_java_client_obeys_them(servers: ServerPair) -> None:
    if (problem := ensure_java()) is not None:
        pytest.skip(f"no Java peer: {problem}")
    root_home = _home(servers.root, "java-root", ROOT)
    out = java_mqadmin(servers, root_home, "createUser", "-c", CLUSTER, "-u", "javauser", "-p", USERS["javauser"])
    assert "create user to" in out and "success" in out, out
    out = java_mqadmin(
        servers, root_home, "createAcl", "-c", CLUSTER, "-s", "User:javauser", "-r", "Topic:AuthOk,Group:CID-jauth",
        "-a", "Pub,Sub", "-d", "Allow",
    )  # fmt: skip
    assert "create acl to" in out and "success" in out, out
    out = java_mqadmin(servers, root_home, "createAcl", "-c", CLUSTER, "-s", "User:javauser", "-r", "Topic:AuthDeny",
                       "-a", "Pub", "-d", "Deny")  # fmt: skip
    assert "success" in out, out
    listed = java_mqadmin(servers, root_home, "listUser", "-c", CLUSTER)
    assert "javauser" in listed and "root" in listed, listed
    got = java_mqadmin(servers, root_home, "getAcl", "-c", CLUSTER, "-s", "User:javauser")
    assert "Topic:AuthOk" in got and "Topic:AuthDeny" in got and "Deny" in got, got
    # a NORMAL user's admin request through Java's mqadmin is refused
    user_home = _home(servers.root, "java-user", Credentials("javauser", USERS["javauser"]))
    refused = java_mqadmin(servers, user_home, "createUser", "-c", CLUSTER, "-u", "sneaky", "-p", "sneaky123")
    assert "16" in refused or "NO_PERMISSION" in refused or "no permission" in refused, refused

    creds = ["--access-key", "javauser", "--secret-key", USERS["javauser"]]
    home = home_for(servers.root, "java-auth")
    sent = java(["produce", "--namesrv", servers.namesrv_addr, "--send", "sync:AuthOk", "--send", "sync:AuthDeny",
                 "--count", "3", *creds], home).start().wait()  # fmt: skip
    assert len([e for e in sent.of("sent") if e.get("topic") == "AuthOk"]) == 3, sent.describe()
    # the Deny rule: Java's client reports the refusal (NO_PERMISSION) as a failed send after its retries
    assert [e for e in sent.of("send_error") if e.get("topic") == "AuthDeny"], sent.describe()
    assert not [e for e in sent.of("sent") if e.get("topic") == "AuthDeny"], sent.describe()
    got_msgs = java(["consume", "--namesrv", servers.namesrv_addr, "--group", "CID-jauth", "--topic", "AuthOk",
                     "--expect", "3", "--timeout", "60", *creds], home).start().wait()  # fmt: skip
    assert len(got_msgs.records()) >= 3, got_msgs.describe()
    wrong = java(["produce", "--namesrv", servers.namesrv_addr, "--send", "sync:AuthOk", "--count", "1",
                  "--access-key", "javauser", "--secret-key", "wrong-secret"], home).start().wait()  # fmt: skip
    assert not wrong.of("sent") and wrong.of("send_error"), wrong.describe()


def test_our_mqadmin_and_sdk(
    servers: ServerPair, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ns = ["-n", servers.namesrv_addr]
    # without credentials: a clear denial, no traceback
    monkeypatch.setenv("ROCKETMQ_HOME", str(_home(servers.root, "ours-none", None)))
    assert mqadmin_main(["createUser", *ns, "-c", CLUSTER, "-u", "sdkuser", "-p", USERS["sdkuser"]]) == 1
    err = capsys.readouterr().err
    assert "access denied" in err and "username cannot be null" in err and "Traceback" not in err, err
    monkeypatch.setenv("ROCKETMQ_HOME", str(_home(servers.root, "ours-root", ROOT)))
    assert mqadmin_main(["createUser", *ns, "-c", CLUSTER, "-u", "sdkuser", "-p", USERS["sdkuser"]]) == 0
    assert mqadmin_main(["createAcl", *ns, "-c", CLUSTER, "-s", "User:sdkuser", "-r", "Topic:AuthOk",
                         "-a", "Pub", "-d", "Allow"]) == 0  # fmt: skip
    assert mqadmin_main(["getAcl", *ns, "-c", CLUSTER, "-s", "User:sdkuser"]) == 0
    assert mqadmin_main(["listUser", *ns, "-c", CLUSTER]) == 0
    out = capsys.readouterr().out
    assert "Topic:AuthOk" in out and "sdkuser" in out
    assert USERS["sdkuser"] not in out and ROOT.secret_key not in out  # passwords are shown masked

    config = ClientConfig(namesrv_addr=servers.namesrv_addr, access_key="sdkuser", secret_key=USERS["sdkuser"])
    producer = BlockingProducer("PID-sdkauth", client_config=config, retry_times_when_send_failed=0)
    producer.start()
    try:
        assert producer.send(Message("AuthOk", b"allowed")).status.name == "SEND_OK"
        with pytest.raises(NoPermission) as info:
            producer.send(Message("AuthDeny", b"not allowed"))
        assert "User:sdkuser" in str(info.value) and USERS["sdkuser"] not in str(info.value)
        assert USERS["sdkuser"] not in repr(config) and USERS["sdkuser"] not in repr(producer)
    finally:
        producer.shutdown()


def _peer_user(servers: ServerPair, name: str, topic: str, group: str) -> None:
    async def create() -> None:
        async with Admin(client_config=ClientConfig(namesrv_addr=servers.namesrv_addr, credentials=ROOT)) as admin:
            api, addr = admin.instance.api, servers.broker_addr
            await admin_auth.create_user(api, addr, name, USERS[name])
            resources = [f"Topic:{topic}", f"Group:{group}"]
            await admin_auth.create_acl(
                api, addr, admin_auth.acl_info(f"User:{name}", resources, ["Pub", "Sub"], None, "Allow")
            )

    asyncio.run(create())


def test_go_client_with_credentials(servers: ServerPair) -> None:
    if (problem := ensure_go()) is not None:
        pytest.skip(f"no Go peer: {problem}")
    _peer_user(servers, "gouser", "AuthGo", "CID-goauth")
    creds = ["--access-key", "gouser", "--secret-key", USERS["gouser"]]
    home = home_for(servers.root, "go-auth")
    sent = go(["produce", "--namesrv", servers.namesrv_addr, "--send", "sync:AuthGo", "--count", "3", *creds],
              home).start().wait()  # fmt: skip
    assert len(sent.of("sent")) == 3, sent.describe()
    got = go(["consume", "--namesrv", servers.namesrv_addr, "--group", "CID-goauth", "--topic", "AuthGo",
              "--expect", "3", "--timeout", "60", *creds], home).start().wait()  # fmt: skip
    assert len(got.records()) >= 3, got.describe()
    denied = go(["produce", "--namesrv", servers.namesrv_addr, "--send", "sync:AuthDeny", "--count", "1", *creds],
                home).start().wait()  # fmt: skip
    assert not denied.of("sent"), denied.describe()


def test_cpp_client_with_credentials(servers: ServerPair) -> None:
    if not PEERS[CVS].installed:
        pytest.skip(f"{CVS} is not installed (scripts/peers.sh)")
    _peer_user(servers, "cppuser", "AuthCpp", "CID-cppauth")
    creds = ["--access-key", "cppuser", "--secret-key", USERS["cppuser"]]
    home = home_for(servers.root, "cpp-auth")
    sent = PeerProc(CVS, ["produce", "--namesrv", servers.namesrv_addr, "--group", "PID-cppauth",
                          "--send", "sync:AuthCpp", "--count", "3", *creds], home).start().wait()  # fmt: skip
    assert len(sent.of("sent")) == 3, sent.describe()
    got = PeerProc(CVS, ["consume", "--namesrv", servers.namesrv_addr, "--group", "CID-cppauth",
                         "--topic", "AuthCpp", "--expect", "3", *creds], home).start().wait()  # fmt: skip
    assert len(got.of("msg")) >= 3, got.describe()
    denied = PeerProc(CVS, ["produce", "--namesrv", servers.namesrv_addr, "--group", "PID-cppauth",
                            "--send", "sync:AuthDeny", "--count", "1", *creds], home).start().wait()  # fmt: skip
    assert not denied.of("sent"), denied.describe()
    assert orjson.dumps(INNER.access_key)  # the inner user exists for the broker's own requests
