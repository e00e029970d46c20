"""Request processors of the NameServer, one method per request code (DefaultRequestProcessor's job).

`NamesrvController` builds one `NamesrvProcessors` and calls `register(dispatcher)`. Every handler is
synchronous (the route table is in memory and single-threaded), so the transport runs them inline
in `data_received` without creating a task per request.
"""

from __future__ import annotations

import logging
import time

import orjson

from broker.config.errors import ConfigError
from broker.config.properties import parse_properties
from broker.config.typed import dump_properties
from broker.namesrv.body import DataVersion, parse_register_body
from broker.namesrv.config import NamesrvConfig
from broker.namesrv.config_update import NamesrvConfigRefused, updated_config
from broker.namesrv.kvconfig import ORDER_TOPIC_CONFIG, KVConfigManager
from broker.namesrv.route import RouteInfoManager
from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.protocol.errors import ProtocolError
from broker.protocol.message import body_crc
from broker.transport.connection import RemotingConnection
from broker.transport.dispatcher import Dispatcher

__all__ = ["MissingField", "NamesrvProcessors"]

log = logging.getLogger(__name__)

# MQVersion ordinal of V4_9_4: from here on clients get standard JSON routes.
_V4_9_4 = 401
_TRUE = "true"


class MissingField(ProtocolError):
    """A required extFields key is absent; answered with SYSTEM_ERROR like Java's RemotingCommandException."""


def _field(cmd: RemotingCommand, name: str) -> str:
    value = cmd.ext_fields.get(name)
    if value is None:
        raise MissingField(f"the custom field <{name}> is null")
    return value


def _int_field(cmd: RemotingCommand, name: str, default: int | None = None) -> int:
    raw = cmd.ext_fields.get(name)
    if raw is None or raw == "":
        if default is None:
            raise MissingField(f"the custom field <{name}> is null")
        return default
    try:
        return int(raw)
    except ValueError:
        raise MissingField(f"the custom field <{name}> is not a number: {raw!r}") from None


class NamesrvProcessors:
    def __init__(self, config: NamesrvConfig, routes: RouteInfoManager, kv: KVConfigManager) -> None:
        self.config = config
        self.routes = routes
        self.kv = kv
        self._started = time.monotonic()

    def register(self, dispatcher: Dispatcher) -> None:
        codes = RequestCode
        table = {
            codes.PUT_KV_CONFIG: self.put_kv_config,
            codes.GET_KV_CONFIG: self.get_kv_config,
            codes.DELETE_KV_CONFIG: self.delete_kv_config,
            codes.GET_KVLIST_BY_NAMESPACE: self.get_kvlist_by_namespace,
            codes.REGISTER_BROKER: self.register_broker,
            codes.UNREGISTER_BROKER: self.unregister_broker,
            codes.GET_ROUTEINFO_BY_TOPIC: self.get_route_info,
            codes.GET_BROKER_CLUSTER_INFO: self.get_broker_cluster_info,
            codes.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topic_list,
            codes.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            codes.QUERY_DATA_VERSION: self.query_data_version,
            codes.BROKER_HEARTBEAT: self.broker_heartbeat,
            codes.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm,
            codes.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm,
            codes.DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
            codes.GET_NAMESRV_CONFIG: self.get_namesrv_config,
            codes.UPDATE_NAMESRV_CONFIG: self.update_namesrv_config,
        }
        for code, handler in table.items():
            dispatcher.register(code, handler)

    # ------------------------------------------------------------------ KV config

    def put_kv_config(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        self.kv.put(_field(cmd, "namespace"), _field(cmd, "key"), _field(cmd, "value"))
        return cmd.response(ResponseCode.SUCCESS)

    def get_kv_config(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        namespace, key = _field(cmd, "namespace"), _field(cmd, "key")
        value = self.kv.get(namespace, key)
        if value is None:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace} Key: {key}")
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"value": value})

    def delete_kv_config(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        self.kv.delete(_field(cmd, "namespace"), _field(cmd, "key"))
        return cmd.response(ResponseCode.SUCCESS)

    def get_kvlist_by_namespace(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        namespace = _field(cmd, "namespace")
        table = self.kv.namespace(namespace)
        if table is None:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace}")
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps({"table": table}))

    # ------------------------------------------------------------------ broker registration and liveness

    def register_broker(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        cluster = _field(cmd, "clusterName")
        broker_addr = _field(cmd, "brokerAddr")
        broker_name = _field(cmd, "brokerName")
        ha_server_addr = _field(cmd, "haServerAddr")
        broker_id = _int_field(cmd, "brokerId")
        crc = _int_field(cmd, "bodyCrc32", 0)
        if crc != 0 and crc != body_crc(cmd.body):
            log.warning("register from %s (%s): body crc32 does not match %d", conn.peer, broker_addr, crc)
            return cmd.response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        ext = cmd.ext_fields
        body = parse_register_body(cmd.body, compressed=ext.get("compressed") == _TRUE, version=cmd.version)
        result = self.routes.register_broker(
            cluster_name=cluster,
            broker_addr=broker_addr,
            broker_name=broker_name,
            broker_id=broker_id,
            ha_server_addr=ha_server_addr,
            body=body,
            timeout_ms=_int_field(cmd, "heartbeatTimeoutMillis", 0) or None,
            enable_acting_master=ext.get("enableActingMaster") == _TRUE,
            zone_name=ext.get("__ZONE_NAME"),
            channel=conn,
        )
        if result is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "register broker failed")
        out: dict[str, str] = {}
        if result.ha_server_addr is not None:
            out["haServerAddr"] = result.ha_server_addr
        if result.master_addr is not None:
            out["masterAddr"] = result.master_addr
        reply_body = b""
        if self.config.return_order_topic_config_to_broker:
            order = self.kv.namespace(ORDER_TOPIC_CONFIG)
            if order:
                reply_body = orjson.dumps({"table": order})
        return cmd.response(ResponseCode.SUCCESS, ext_fields=out, body=reply_body)

    def unregister_broker(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        self.routes.unregister_broker(
            _field(cmd, "clusterName"),
            _field(cmd, "brokerAddr"),
            _field(cmd, "brokerName"),
            _int_field(cmd, "brokerId"),
        )
        return cmd.response(ResponseCode.SUCCESS)

    def query_data_version(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        cluster, broker_addr = _field(cmd, "clusterName"), _field(cmd, "brokerAddr")
        try:
            version = DataVersion.from_json(orjson.loads(cmd.body) if cmd.body else None)
        except orjson.JSONDecodeError:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "DataVersion body is not valid JSON")
        changed = self.routes.data_version_changed(cluster, broker_addr, version)
        self.routes.refresh(cluster, broker_addr)
        ours = self.routes.broker_data_version(cluster, broker_addr)
        return cmd.response(
            ResponseCode.SUCCESS,
            ext_fields={"changed": "true" if changed else "false"},
            body=orjson.dumps(ours.to_json()) if ours is not None else b"",
        )

    def broker_heartbeat(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        self.routes.refresh(
            _field(cmd, "clusterName"),
            _field(cmd, "brokerAddr"),
            timeout_ms=_int_field(cmd, "heartbeatTimeoutMills", 0) or None,
        )
        return cmd.response(ResponseCode.SUCCESS)

    # ------------------------------------------------------------------ route queries

    def get_route_info(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        topic = _field(cmd, "topic")
        waiting = time.monotonic() - self._started < self.config.wait_seconds_for_service
        if self.config.need_wait_for_service and waiting:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "name server not ready")
        standard = cmd.version >= _V4_9_4 or cmd.ext_fields.get("acceptStandardJsonOnly") == _TRUE
        order_conf = self.kv.get(ORDER_TOPIC_CONFIG, topic) if self.config.order_message_enable else None
        body = self.routes.topic_route(topic, standard_json=standard, order_topic_conf=order_conf)
        if body is None:
            return cmd.response(
                ResponseCode.TOPIC_NOT_EXIST,
                f"No topic route info in name server for the topic: {topic}",
            )
        return cmd.response(ResponseCode.SUCCESS, body=body)

    def get_broker_cluster_info(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, body=self.routes.cluster_info())

    def get_all_topic_list(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        if not self.config.enable_all_topic_list:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "disable")
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps({"topicList": self.routes.all_topics()}))

    def get_topics_by_cluster(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        if not self.config.enable_topic_list:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "disable")
        topics = self.routes.topics_by_cluster(_field(cmd, "cluster"))
        return cmd.response(ResponseCode.SUCCESS, body=orjson.dumps({"topicList": topics}))

    # ------------------------------------------------------------------ admin

    def wipe_write_perm(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        broker_name = _field(cmd, "brokerName")
        count = self.routes.set_write_perm(broker_name, enable=False)
        log.info("wiped write perm of broker %s on %d topics (asked by %s)", broker_name, count, conn.peer)
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"wipeTopicCount": str(count)})

    def add_write_perm(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        broker_name = _field(cmd, "brokerName")
        count = self.routes.set_write_perm(broker_name, enable=True)
        log.info("added write perm of broker %s on %d topics (asked by %s)", broker_name, count, conn.peer)
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"addTopicCount": str(count)})

    def delete_topic(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        self.routes.delete_topic(_field(cmd, "topic"), cmd.ext_fields.get("clusterName") or None)
        return cmd.response(ResponseCode.SUCCESS)

    def get_namesrv_config(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, body=dump_properties(self.config).encode())

    def update_namesrv_config(self, conn: RemotingConnection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            updates = parse_properties(bytes(cmd.body).decode("utf-8"))
        except (UnicodeDecodeError, ConfigError) as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"string2Properties error: {exc}")
        try:
            self.config = updated_config(self.config, updates)
        except NamesrvConfigRefused as exc:
            log.info("update of the NameServer config from %s refused: %s", conn.peer, exc)
            return cmd.response(exc.response_code, str(exc))
        log.info(
            "NameServer config updated by %s: %s (persisted to %s)", conn.peer, updates, self.config.config_store_path
        )
        return cmd.response(ResponseCode.SUCCESS)
