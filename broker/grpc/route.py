"""QueryRoute and QueryAssignment: a topic's route as gRPC `MessageQueue`s.

The route comes from the NameServers (GET_ROUTEINFO_BY_TOPIC, as the remoting clients read it) or, for a broker
without NameServers, from its own topic table. Every broker address becomes `host:grpc port`, as RocketMQ's
local-mode proxy rewrites it: this broker's own entry gets the port the endpoint is bound to, other brokers the
configured `grpcServerPort`; with `grpcRoutePortOffset` set, every broker (this one too) is named at its remoting port
plus that offset, as the operator's per-broker nodePorts need. With `grpcRouteDomain` set, a broker at an IPv4
address is named by the DNS name Kubernetes gives a pod's address (`10-1-2-3.<namespace>.pod`), which a TLS client
that checks the host name it dials can match against a certificate's wildcard. Queues follow the proxy's order:
read-only, write-only, then read-write ids.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any

from broker.client.route import MASTER_ID, Perm, QueueData, TopicRouteData
from broker.grpc.pb import definition

__all__ = ["accept_types", "endpoints_of", "message_queues", "route_grpc_host", "route_grpc_port"]

_TYPES = {
    "NORMAL": (definition.MessageType.NORMAL,),
    "FIFO": (definition.MessageType.FIFO,),
    "DELAY": (definition.MessageType.DELAY,),
    "TRANSACTION": (definition.MessageType.TRANSACTION,),
    "MIXED": (
        definition.MessageType.NORMAL,
        definition.MessageType.FIFO,
        definition.MessageType.DELAY,
        definition.MessageType.TRANSACTION,
    ),
}


def accept_types(attributes: dict[str, str] | None) -> tuple[int, ...]:
    """The message types a topic takes, from its `message.type` attribute (absent: NORMAL only, as RocketMQ)."""
    value = (attributes or {}).get("message.type", "NORMAL").upper()
    return tuple(int(t) for t in _TYPES.get(value, _TYPES["NORMAL"]))


def endpoints_of(host: str, port: int) -> Any:
    """An `Endpoints` of one address, its scheme from the host's form."""
    ep = definition.Endpoints()
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        ep.scheme = definition.AddressScheme.DOMAIN_NAME
    else:
        ep.scheme = definition.AddressScheme.IPv4 if ip.version == 4 else definition.AddressScheme.IPv6
    address = ep.addresses.add()
    address.host, address.port = host, port
    return ep


def route_grpc_port(addr: str, *, own_addr: str, bound_port: int, server_port: int, offset: int) -> int:
    """The gRPC port the route names for a broker at remoting address `addr` (host:port).

    offset 0: this broker (`own_addr`) at the port its endpoint is bound to, any other at `server_port` (every
    broker listens on the same one). Otherwise every broker at its remoting port + offset: behind per-broker
    nodePorts the port a client must dial differs per broker, and is not the one the pod listens on."""
    if offset:
        port = int(addr.rpartition(":")[2]) + offset
        if not 0 < port < 65536:
            raise ValueError(f"remoting address {addr} + grpcRoutePortOffset {offset} is no port")
        return port
    return bound_port if addr == own_addr else server_port


def route_grpc_host(host: str, domain: str) -> str:
    """The host the route names for a broker at `host`: itself, or with `domain` set and `host` an IPv4 address,
    the address with dashes for dots under `domain` (Kubernetes' pod A records: `10-1-2-3.<namespace>.pod`)."""
    if not domain:
        return host
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host
    return f"{str(ip).replace('.', '-')}.{domain}" if ip.version == 4 else host


def _queue_perms(qd: QueueData) -> Iterable[int]:
    r, w = qd.read_queue_nums, qd.write_queue_nums
    readable, writeable = Perm.readable(qd.perm), Perm.writeable(qd.perm)
    if not readable and not writeable:
        yield from [definition.Permission.NONE] * max(1, r, w)
        return
    rw = min(r, w) if readable and writeable else 0
    yield from [definition.Permission.READ] * ((r - rw) if readable else 0)
    yield from [definition.Permission.WRITE] * ((w - rw) if writeable else 0)
    yield from [definition.Permission.READ_WRITE] * rw


def message_queues(topic: str, route: TopicRouteData, grpc_address_of: Any, types: tuple[int, ...]) -> list[Any]:
    """The gRPC queues of a route: masters only (the SDKs write to and receive from `broker.id == 0`).
    `grpc_address_of(remoting_addr)` gives the (host, port) a client dials for a broker's remoting address."""
    out = []
    for qd in route.queue_datas:
        bd = route.broker(qd.broker_name)
        addr = bd.broker_addrs.get(MASTER_ID) if bd is not None else None
        if not addr:
            continue
        try:
            host, port = grpc_address_of(addr)
        except ValueError:  # an address no client could dial: its queues are left out, as a broker without one
            continue
        endpoints = endpoints_of(host, port)
        for queue_id, perm in enumerate(_queue_perms(qd)):
            mq = definition.MessageQueue()
            mq.topic.name = topic
            mq.id = queue_id
            mq.permission = perm
            mq.broker.name = qd.broker_name
            mq.broker.id = MASTER_ID
            mq.broker.endpoints.CopyFrom(endpoints)
            mq.accept_message_types.extend(types)
            out.append(mq)
    return out
