"""ACL 2.0 on a real broker over TCP: the admin requests 3001-3010, signed sends and pulls, refusals that
name the user, resource and action and leave the connection serving, persistence, and no secret in logs."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import orjson
import pytest

from broker.protocol.codes import ResponseCode
from broker.protocol.command import RemotingCommand
from broker.protocol.signature import Credentials
from tests.auth.auth_harness import INNER, ROOT, SECURED, acl_body, create_user, entry, signed_client
from tests.server.server_harness import cluster

NO_PERMISSION = ResponseCode.NO_PERMISSION


async def test_users_acls_and_refusals(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with cluster(tmp_path, **SECURED) as c:
        root = await signed_client(c, ROOT)
        assert (await create_user(root, "alice", "alicesecret")).code == 0
        r = await root.request(
            3006,
            {"subject": "User:alice"},
            acl_body(
                "User:alice",
                entry("Topic:app-*", ["Pub", "Sub"]),
                entry("Topic:app-secret", ["Pub"], "Deny"),
                entry("Group:CG", ["Sub"]),
            ),
        )
        assert r.code == 0, r.remark
        got = await root.request(3009, {"subject": "User:alice"})
        assert got.code == 0 and orjson.loads(got.body)["policies"][0]["entries"][1]["decision"] == "Deny"
        users = orjson.loads((await root.request(3005, {})).body)
        assert {u["username"] for u in users} == {"root", "alice", INNER.access_key}

        alice = await signed_client(c, Credentials("alice", "alicesecret"))
        ok = await alice.send("app-orders", b"one")
        assert ok.code == 0, ok.remark
        pulled = await alice.pull("app-orders", 0, group="CG")
        assert pulled.code == 0, pulled.remark

        denied = await alice.send("app-secret", b"no")
        assert denied.code == NO_PERMISSION
        assert "User:alice" in (denied.remark or "") and "Topic:app-secret" in (denied.remark or "")
        assert "Pub" in (denied.remark or "") and "deny" in (denied.remark or "")
        other = await alice.send("elsewhere", b"no")
        assert other.code == NO_PERMISSION and "no matched policies" in (other.remark or "")
        wrong_group = await alice.pull("app-orders", 0, group="OtherGroup")
        assert wrong_group.code == NO_PERMISSION and "Group:OtherGroup" in (wrong_group.remark or "")
        # a NORMAL user doing an admin request
        admin = await create_user(alice, "eve", "evesecret1")
        assert admin.code == NO_PERMISSION and "Cluster:TestCluster" in (admin.remark or "")
        # the refused connection keeps serving, and so do other clients
        again = await alice.send("app-orders", b"two")
        assert again.code == 0, again.remark
        assert (await root.send("anything", b"root may")).code == 0

        # unsigned, unknown user, wrong secret
        anonymous = await signed_client(c, None)
        r = await anonymous.send("app-orders", b"x")
        assert r.code == NO_PERMISSION and "username cannot be null" in (r.remark or "")
        wrong = await signed_client(c, Credentials("alice", "not-the-secret"))
        r = await wrong.send("app-orders", b"x")
        assert r.code == NO_PERMISSION and "check signature failed" in (r.remark or "")
        ghost = await signed_client(c, Credentials("ghost", "whatever1"))
        r = await ghost.send("app-orders", b"x")
        assert r.code == NO_PERMISSION and "User:ghost is not found" in (r.remark or "")

        # a refused one-way request gets no answer and the connection stays usable
        oneway = RemotingCommand(code=15, ext_fields={"consumerGroup": "Nope", "topic": "app-orders", "queueId": "0",
                                                      "commitOffset": "1"})  # fmt: skip
        await wrong.conn.invoke_oneway(oneway)
        await asyncio.sleep(0.1)
        assert not wrong.conn.is_closing
        assert (await wrong.send("app-orders", b"x")).code == NO_PERMISSION

        # disabling a user refuses it at once
        r = await root.request(3002, {"username": "alice"}, orjson.dumps({"userStatus": "disable"}))
        assert r.code == 0, r.remark
        r = await alice.send("app-orders", b"x")
        assert r.code == NO_PERMISSION and "disabled" in (r.remark or "")

        # a NORMAL user cannot make itself SUPER (RocketMQ: SYSTEM_ERROR)
        await root.request(3002, {"username": "alice"}, orjson.dumps({"userStatus": "enable"}))
        r = await alice.request(3002, {"username": "alice"}, orjson.dumps({"userType": "Super"}))
        assert r.code in (NO_PERMISSION, ResponseCode.SYSTEM_ERROR)
        assert c.running_broker.auth.store.users["alice"].user_type.label == "Normal"

    text = caplog.text
    for secret in ("alicesecret", ROOT.secret_key, INNER.secret_key, "not-the-secret", "evesecret1"):
        assert secret not in text


async def test_users_and_acls_survive_a_restart_and_config_hides_secrets(tmp_path: Path) -> None:
    async with cluster(tmp_path, **SECURED) as c:
        root = await signed_client(c, ROOT)
        assert (await create_user(root, "bob", "bobsecret1")).code == 0
        r = await root.request(3006, {"subject": "User:bob"}, acl_body("User:bob", entry("Topic:*", ["Pub"])))
        assert r.code == 0, r.remark
        config = await root.request(26)  # GET_BROKER_CONFIG
        assert config.code == 0
        assert ROOT.secret_key.encode() not in config.body and INNER.secret_key.encode() not in config.body
        assert b"initAuthenticationUser=******" in config.body
        await c.restart_broker()
        root = await signed_client(c, ROOT)
        got = orjson.loads((await root.request(3009, {"subject": "User:bob"})).body)
        assert got["policies"][0]["entries"][0]["resource"] == "Topic:*"
        # delete the user: its ACL goes too
        assert (await root.request(3003, {"username": "bob"})).code == 0
        r = await root.request(3009, {"subject": "User:bob"})
        assert r.code == NO_PERMISSION and "not exist" in (r.remark or "")


async def test_auth_off_accepts_everything_and_admin_requests_still_work(tmp_path: Path) -> None:
    async with cluster(tmp_path) as c:
        plain = await signed_client(c, None)
        assert (await plain.send("T", b"x")).code == 0
        assert (await create_user(plain, "carol", "carolsecret")).code == 0
        users = orjson.loads((await plain.request(3004, {"username": "carol"})).body)
        assert users["userType"] == "Normal" and users["userStatus"] == "enable"
        bad = await plain.request(3006, {"subject": "User:carol"}, b"{not json")
        assert bad.code == NO_PERMISSION and "not JSON" in (bad.remark or "")
        assert (await plain.request(3001, {"username": ""}, b"{}")).code == ResponseCode.INVALID_PARAMETER
        logging.getLogger(__name__).info("auth off: %d requests accepted", 3)
