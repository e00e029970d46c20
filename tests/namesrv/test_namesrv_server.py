"""The NameServer over real TCP: registration (both body forms), routes, cluster info, liveness, KV config."""

from __future__ import annotations

import asyncio
import zlib

import orjson

from broker.namesrv.body import DataVersion, RegisterBrokerBody, TopicConfig, encode_register_body
from broker.namesrv.controller import NamesrvController
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.transport import RemotingConnection, connect

CLUSTER = "DefaultCluster"


def _body(*topics: str, counter: int = 1) -> RegisterBrokerBody:
    return RegisterBrokerBody(
        topic_configs={t: TopicConfig(t, read_queue_nums=4, write_queue_nums=4, perm=6) for t in topics},
        data_version=DataVersion(counter=counter, timestamp=1700000000000),
    )


def _register(
    name: str,
    broker_id: int,
    addr: str,
    body: RegisterBrokerBody,
    *,
    compressed: bool = False,
    crc: int | None = None,
    timeout_ms: int | None = None,
) -> RemotingCommand:
    raw = encode_register_body(body, compressed=compressed)
    ext = {
        "brokerName": name,
        "brokerAddr": addr,
        "clusterName": CLUSTER,
        "haServerAddr": addr.rsplit(":", 1)[0] + ":10912",
        "brokerId": str(broker_id),
        "compressed": "true" if compressed else "false",
        "bodyCrc32": str(zlib.crc32(raw) & 0x7FFFFFFF if crc is None else crc),
        "enableActingMaster": "false",
    }
    if timeout_ms is not None:
        ext["heartbeatTimeoutMillis"] = str(timeout_ms)
    return RemotingCommand(code=RequestCode.REGISTER_BROKER, ext_fields=ext, body=raw)


def _route(topic: str, version: int = 479, **ext: str) -> RemotingCommand:
    return RemotingCommand(code=RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": topic, **ext}, version=version)


async def _start(config) -> tuple[NamesrvController, RemotingConnection]:
    controller = NamesrvController(config)
    await controller.start()
    return controller, await connect(("127.0.0.1", controller.port))


def test_register_master_and_slave_then_query_routes(arun, namesrv_config) -> None:
    async def body() -> None:
        ns, client = await _start(namesrv_config)
        master = await connect(("127.0.0.1", ns.port))
        slave = await connect(("127.0.0.1", ns.port))
        reply = await master.invoke(_register("broker-a", 0, "10.0.0.1:10911", _body("TopicA", "TBW102")), 5)
        assert (reply.code, reply.ext_fields) == (ResponseCode.SUCCESS, {})
        # The slave registers with a compressed body and learns its master's addresses.
        reply = await slave.invoke(
            _register("broker-a", 1, "10.0.0.2:10911", _body("TopicA", "TBW102"), compressed=True), 5
        )
        assert reply.code == ResponseCode.SUCCESS
        assert reply.ext_fields == {"masterAddr": "10.0.0.1:10911", "haServerAddr": "10.0.0.1:10912"}

        old = await client.invoke(_route("TopicA", version=317), 5)
        assert old.code == ResponseCode.SUCCESS
        assert old.body == (
            b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"broker-a",'
            b'"cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},'
            b'"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
        )
        new = await client.invoke(_route("TopicA", version=479), 5)
        assert b'"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"}' in new.body
        assert orjson.loads(new.body)["queueDatas"][0]["readQueueNums"] == 4
        accept = await client.invoke(_route("TopicA", version=121, acceptStandardJsonOnly="true"), 5)
        assert accept.body == new.body

        missing = await client.invoke(_route("NoSuchTopic"), 5)
        assert missing.code == ResponseCode.TOPIC_NOT_EXIST
        assert "NoSuchTopic" in missing.remark

        cluster = await client.invoke(RemotingCommand(code=RequestCode.GET_BROKER_CLUSTER_INFO), 5)
        assert cluster.body == (
            b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},'
            b'"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}},'
            b'"clusterAddrTable":{"DefaultCluster":["broker-a"]}}'
        )
        topics = await client.invoke(RemotingCommand(code=RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER), 5)
        assert sorted(orjson.loads(topics.body)["topicList"]) == ["TBW102", "TopicA"]
        by_cluster = await client.invoke(
            RemotingCommand(code=RequestCode.GET_TOPICS_BY_CLUSTER, ext_fields={"cluster": CLUSTER}), 5
        )
        assert sorted(orjson.loads(by_cluster.body)["topicList"]) == ["TBW102", "TopicA"]

        # The master's channel closing drops it at once; the slave stays in the route.
        master.close()
        await master.closed
        await asyncio.sleep(0.1)
        after = orjson.loads((await client.invoke(_route("TopicA"), 5)).body)
        assert after["brokerDatas"][0]["brokerAddrs"] == {"1": "10.0.0.2:10911"}
        slave.close()
        await slave.closed
        await asyncio.sleep(0.1)
        assert (await client.invoke(_route("TopicA"), 5)).code == ResponseCode.TOPIC_NOT_EXIST
        client.close()
        await ns.shutdown()

    arun(body())


def test_register_rejects_bad_crc_and_bad_body(arun, namesrv_config) -> None:
    async def body() -> None:
        ns, client = await _start(namesrv_config)
        bad = await client.invoke(_register("broker-b", 0, "10.0.0.3:10911", _body("T1", "T2"), crc=12345), 5)
        assert (bad.code, bad.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")
        garbled = _register("broker-b", 0, "10.0.0.3:10911", _body("T1", "T2"), compressed=True, crc=0)
        garbled.body = b"\x78\x9cnot deflate"
        reply = await client.invoke(garbled, 5)
        assert reply.code == ResponseCode.SYSTEM_ERROR and "inflate" in reply.remark
        missing = await client.invoke(RemotingCommand(code=RequestCode.REGISTER_BROKER, ext_fields={}), 5)
        assert missing.code == ResponseCode.SYSTEM_ERROR and "is null" in missing.remark
        assert (await client.invoke(_route("T1"), 5)).code == ResponseCode.TOPIC_NOT_EXIST
        # Nothing was registered and the connection still works.
        ok = await client.invoke(_register("broker-b", 0, "10.0.0.3:10911", _body("T1", "T2")), 5)
        assert ok.code == ResponseCode.SUCCESS
        client.close()
        await ns.shutdown()

    arun(body())


def test_silent_broker_expires(arun, namesrv_config) -> None:
    async def body() -> None:
        ns, client = await _start(namesrv_config)
        broker = await connect(("127.0.0.1", ns.port))
        reply = await broker.invoke(_register("broker-c", 0, "10.0.0.4:10911", _body("T3", "T4"), timeout_ms=400), 5)
        assert reply.code == ResponseCode.SUCCESS
        # Heartbeats keep it alive past its timeout...
        for _ in range(4):
            await asyncio.sleep(0.2)
            beat = RemotingCommand(
                code=RequestCode.BROKER_HEARTBEAT,
                ext_fields={"clusterName": CLUSTER, "brokerAddr": "10.0.0.4:10911", "brokerName": "broker-c"},
            )
            assert (await broker.invoke(beat, 5)).code == ResponseCode.SUCCESS
        assert (await client.invoke(_route("T3"), 5)).code == ResponseCode.SUCCESS
        # ...then silence: it is dropped and its channel closed.
        await asyncio.wait_for(broker.closed, 3)
        assert (await client.invoke(_route("T3"), 5)).code == ResponseCode.TOPIC_NOT_EXIST
        cluster = orjson.loads(
            (await client.invoke(RemotingCommand(code=RequestCode.GET_BROKER_CLUSTER_INFO), 5)).body.replace(
                b"{0:", b'{"0":'
            )
        )
        assert cluster == {"brokerAddrTable": {}, "clusterAddrTable": {}}
        client.close()
        await ns.shutdown()

    arun(body())


def test_data_version_perm_and_topic_admin(arun, namesrv_config) -> None:
    async def body() -> None:
        ns, client = await _start(namesrv_config)
        registered = _body("T5", "T6", counter=7)
        assert (await client.invoke(_register("broker-d", 0, "10.0.0.5:10911", registered), 5)).code == 0
        ext = {"clusterName": CLUSTER, "brokerAddr": "10.0.0.5:10911", "brokerName": "broker-d", "brokerId": "0"}
        same = RemotingCommand(
            code=RequestCode.QUERY_DATA_VERSION, ext_fields=ext, body=orjson.dumps(registered.data_version.to_json())
        )
        reply = await client.invoke(same, 5)
        assert reply.ext_fields == {"changed": "false"}
        assert orjson.loads(reply.body)["counter"] == 7
        newer = RemotingCommand(
            code=RequestCode.QUERY_DATA_VERSION, ext_fields=ext, body=b'{"counter":8,"stateVersion":0,"timestamp":1}'
        )
        assert (await client.invoke(newer, 5)).ext_fields == {"changed": "true"}

        wipe = RemotingCommand(code=RequestCode.WIPE_WRITE_PERM_OF_BROKER, ext_fields={"brokerName": "broker-d"})
        assert (await client.invoke(wipe, 5)).ext_fields == {"wipeTopicCount": "2"}
        assert orjson.loads((await client.invoke(_route("T5"), 5)).body)["queueDatas"][0]["perm"] == 4
        add = RemotingCommand(code=RequestCode.ADD_WRITE_PERM_OF_BROKER, ext_fields={"brokerName": "broker-d"})
        assert (await client.invoke(add, 5)).ext_fields == {"addTopicCount": "2"}
        assert orjson.loads((await client.invoke(_route("T5"), 5)).body)["queueDatas"][0]["perm"] == 6

        delete = RemotingCommand(code=RequestCode.DELETE_TOPIC_IN_NAMESRV, ext_fields={"topic": "T5"})
        assert (await client.invoke(delete, 5)).code == ResponseCode.SUCCESS
        assert (await client.invoke(_route("T5"), 5)).code == ResponseCode.TOPIC_NOT_EXIST
        assert (await client.invoke(_route("T6"), 5)).code == ResponseCode.SUCCESS

        unregister = RemotingCommand(code=RequestCode.UNREGISTER_BROKER, ext_fields=ext)
        assert (await client.invoke(unregister, 5)).code == ResponseCode.SUCCESS
        assert (await client.invoke(_route("T6"), 5)).code == ResponseCode.TOPIC_NOT_EXIST

        config = await client.invoke(RemotingCommand(code=RequestCode.GET_NAMESRV_CONFIG), 5)
        assert b"listenPort=0\n" in config.body and b"scanNotActiveBrokerInterval=50\n" in config.body
        client.close()
        await ns.shutdown()

    arun(body())


def test_kv_config_round_trip_and_persistence(arun, namesrv_config) -> None:
    def kv(code: int, **ext: str) -> RemotingCommand:
        return RemotingCommand(code=code, ext_fields=ext)

    async def body() -> None:
        ns, client = await _start(namesrv_config)
        put = kv(RequestCode.PUT_KV_CONFIG, namespace="ORDER_TOPIC_CONFIG", key="OrderTopic", value="broker-a:4")
        assert (await client.invoke(put, 5)).code == ResponseCode.SUCCESS
        get = await client.invoke(kv(RequestCode.GET_KV_CONFIG, namespace="ORDER_TOPIC_CONFIG", key="OrderTopic"), 5)
        assert (get.code, get.ext_fields) == (ResponseCode.SUCCESS, {"value": "broker-a:4"})
        listing = await client.invoke(kv(RequestCode.GET_KVLIST_BY_NAMESPACE, namespace="ORDER_TOPIC_CONFIG"), 5)
        assert orjson.loads(listing.body) == {"table": {"OrderTopic": "broker-a:4"}}
        # The broker gets the ORDER_TOPIC_CONFIG table back when it registers.
        reg = await client.invoke(_register("broker-e", 0, "10.0.0.6:10911", _body("T7", "T8")), 5)
        assert orjson.loads(reg.body) == {"table": {"OrderTopic": "broker-a:4"}}
        absent = await client.invoke(kv(RequestCode.GET_KV_CONFIG, namespace="ns", key="nope"), 5)
        assert absent.code == ResponseCode.QUERY_NOT_FOUND
        await client.invoke(kv(RequestCode.PUT_KV_CONFIG, namespace="ns", key="k", value="v"), 5)
        await client.invoke(kv(RequestCode.DELETE_KV_CONFIG, namespace="ns", key="k"), 5)
        gone = await client.invoke(kv(RequestCode.GET_KV_CONFIG, namespace="ns", key="k"), 5)
        assert gone.code == ResponseCode.QUERY_NOT_FOUND
        client.close()
        await ns.shutdown()
        # A restarted NameServer reads the persisted table.
        ns, client = await _start(namesrv_config)
        again = await client.invoke(kv(RequestCode.GET_KV_CONFIG, namespace="ORDER_TOPIC_CONFIG", key="OrderTopic"), 5)
        assert again.ext_fields == {"value": "broker-a:4"}
        client.close()
        await ns.shutdown()

    arun(body())
