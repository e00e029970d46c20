"""The pure parts of bench/vs_rocketmq.py and bench/vs_grpc.py: the broker.conf both brokers get, the gRPC keys
and Apache RocketMQ's proxy configuration (rmq-proxy.json), and the table of ratios.

Nothing here starts a process, so tests/test_bench_vs_table.py checks it without Java.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from broker.store.config import StoreConfig

__all__ = [
    "BROKER_NAME",
    "CLIENT_CPU",
    "CLUSTER_NAME",
    "HIGHER_IS_BETTER",
    "Row",
    "Sample",
    "broker_props",
    "client_bounds",
    "conf_text",
    "disk_shortfall",
    "grpc_props",
    "lower_is_better",
    "namesrv_props",
    "proxy_config",
    "render",
    "summarize",
]

CLUSTER_NAME = "VsCluster"
BROKER_NAME = "vs-broker"
#: Metrics where more is better (rates); for the others (latency, memory, time, failures) less is.
HIGHER_IS_BETTER = ("msgs_per_s",)
#: the client process's CPU time a message, over the measured seconds (every thread of it, user and system)
CLIENT_CPU = "client_cpu_us"
FLUSH_TYPES = ("ASYNC_FLUSH", "SYNC_FLUSH")
ROLES = ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE")


#: diskMaxUsedSpaceRatio's default, the same on both brokers: past it they delete CommitLog files before their time
CLEANING_RATIO = StoreConfig.model_fields["disk_max_used_space_ratio"].default / 100


def disk_shortfall(used: int, usable: int, need: int) -> str | None:
    """Why a run that writes `need` more bytes should not start on a disk with `used` of `usable` bytes (as
    broker.store.retention.disk_space counts them), or None when it stays below CLEANING_RATIO. Past it both
    brokers delete the oldest CommitLog files, W4's backlog among them, and the drain would wait for messages
    that are gone."""
    now, after = used / usable, (used + need) / usable
    if after <= CLEANING_RATIO:
        return None
    return (
        f"the stores' disk is {now:.0%} full and would be {after:.0%} with this run's largest store "
        f"({need / (1 << 30):.1f} GiB); past {CLEANING_RATIO:.0%} (diskMaxUsedSpaceRatio) both brokers delete "
        "CommitLog files early, a backlog not yet drained among them: free space there, or pass --dir on a roomier disk"
    )


def conf_text(props: Mapping[str, object]) -> str:
    """A .properties file, one `key=value` a line, in the given order."""
    return "".join(f"{key}={value}\n" for key, value in props.items())


def namesrv_props(port: int, root: Path) -> dict[str, object]:
    """The NameServer's properties; both NameServers read these keys."""
    return {"listenPort": port, "bindAddress": "127.0.0.1", "kvConfigPath": root / "kvConfig.json"}


def broker_props(
    *,
    root: Path,
    listen_port: int,
    namesrv: str,
    flush: str = "ASYNC_FLUSH",
    role: str = "ASYNC_MASTER",
) -> dict[str, object]:
    """broker.conf for either broker: the same keys, each one Apache RocketMQ's name for it. A SLAVE
    (brokerId 1) learns its master's HA address (brokerIP2:haListenPort) from its registration's answer: Apache
    RocketMQ 5.3.3 given `haMasterAddress` never connects ("HAClient connect to master null")."""
    if flush not in FLUSH_TYPES or role not in ROLES:
        raise ValueError(f"flushDiskType {flush!r} / brokerRole {role!r}")
    props: dict[str, object] = {
        "brokerClusterName": CLUSTER_NAME,
        "brokerName": BROKER_NAME,
        "brokerId": 1 if role == "SLAVE" else 0,
        "brokerRole": role,
        "flushDiskType": flush,
        "listenPort": listen_port,
        "haListenPort": listen_port + 1,
        "bindAddress": "127.0.0.1",
        "brokerIP1": "127.0.0.1",
        "brokerIP2": "127.0.0.1",  # the HA address it registers; Java's default is the host's first address
        "namesrvAddr": namesrv,
        "storePathRootDir": root / "store",
        "storePathCommitLog": root / "store" / "commitlog",
    }
    if role == "SYNC_MASTER":
        # The same guarantee on both sides: a reply only once the slave holds the message. Apache RocketMQ 5.x
        # (not in controller mode) waits for a slave only from inSyncReplicas=2 on, the master counted; with
        # its default of 1 a SYNC_MASTER answers at once. Ours always waits for one slave, as 4.x did.
        props["inSyncReplicas"] = 2
    return props


def grpc_props(grpc_port: int) -> dict[str, object]:
    """The broker.conf keys that turn our broker's gRPC endpoint on (Apache's broker ignores them: there the
    proxy process serves gRPC, configured by `proxy_config`)."""
    if not 0 < grpc_port < 65536:
        raise ValueError(f"grpcServerPort {grpc_port}")
    return {"enableProxy": "true", "grpcServerPort": grpc_port}


def proxy_config(*, grpc_port: int, remoting_port: int, namesrv: str) -> dict[str, object]:
    """rmq-proxy.json of Apache RocketMQ's proxy in local mode (`ProxyStartup -pm local -bc broker.conf -pc
    rmq-proxy.json`): it runs the broker of broker.conf in its own JVM and serves gRPC on `grpc_port`, plaintext
    and TLS on one port; `remoting_port` is its own remoting listener (8080 by default, so always set)."""
    for name, port in (("grpcServerPort", grpc_port), ("remotingListenPort", remoting_port)):
        if not 0 < port < 65536:
            raise ValueError(f"{name} {port}")
    if grpc_port == remoting_port:
        raise ValueError("grpcServerPort and remotingListenPort must differ")
    return {
        "rocketMQClusterName": CLUSTER_NAME,
        "proxyMode": "LOCAL",
        "namesrvAddr": namesrv,
        "grpcServerPort": grpc_port,
        "remotingListenPort": remoting_port,
    }


@dataclass(frozen=True)
class Sample:
    """One measured value: round r, broker "ours" or "reference", e.g. ("W1", "msgs_per_s")."""

    round: int
    broker: str
    workload: str
    metric: str
    value: float


@dataclass(frozen=True)
class Row:
    """A workload's metric over the rounds: each broker's median and range, the ratio of the medians
    (ours / reference) and the range of the per-round ratios."""

    workload: str
    metric: str
    ours: tuple[float, float, float] | None  # median, min, max
    reference: tuple[float, float, float] | None
    ratio: float | None
    ratio_range: tuple[float, float] | None
    lower_is_better: bool

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _spread(values: list[float]) -> tuple[float, float, float] | None:
    return (statistics.median(values), min(values), max(values)) if values else None


def lower_is_better(metric: str) -> bool:
    return metric not in HIGHER_IS_BETTER


def summarize(samples: Iterable[Sample]) -> list[Row]:
    """One Row per (workload, metric), in the order they were first measured."""
    by_key: dict[tuple[str, str], dict[str, dict[int, float]]] = {}
    for s in samples:
        by_key.setdefault((s.workload, s.metric), {"ours": {}, "reference": {}})[s.broker][s.round] = s.value
    rows = []
    for (workload, metric), sides in by_key.items():
        ours, ref = _spread(list(sides["ours"].values())), _spread(list(sides["reference"].values()))
        ratio = ours[0] / ref[0] if ours and ref and ref[0] else None
        paired = [sides["ours"][r] / v for r, v in sides["reference"].items() if v and r in sides["ours"]]
        ratio_range = (min(paired), max(paired)) if paired else None
        rows.append(Row(workload, metric, ours, ref, ratio, ratio_range, lower_is_better(metric)))
    return rows


def _fmt(value: float) -> str:
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def _cell(spread: tuple[float, float, float] | None) -> str:
    if spread is None:
        return "-"
    median, low, high = spread
    return _fmt(median) if low == high else f"{_fmt(median)} [{_fmt(low)}-{_fmt(high)}]"


def render(rows: Iterable[Row]) -> list[list[str]]:
    """The table's cells, a header row first: medians [min-max] over the rounds, and ours / reference."""
    table = [["workload", "metric", "ours", "reference", "ours/ref", "per-round ratios", "better"]]
    for row in rows:
        ratio = "-" if row.ratio is None else f"{row.ratio:.2f}"
        spread = "-" if row.ratio_range is None else f"{row.ratio_range[0]:.2f}-{row.ratio_range[1]:.2f}"
        better = "lower" if row.lower_is_better else "higher"
        table.append([row.workload, row.metric, _cell(row.ours), _cell(row.reference), ratio, spread, better])
    return table


def client_bounds(rows: Iterable[Row], cpus: int) -> list[str]:
    """What the client alone allows, a line per workload that has msg/s and the client's CPU a message: with the
    client sharing the host's `cpus`, ours can send at most cpus / (client CPU a message) even if the broker cost
    nothing; that bound as a multiple of the reference's msg/s is the highest ratio this host can show."""
    by_key = {(row.workload, row.metric): row for row in rows}
    lines = []
    for (workload, metric), row in by_key.items():
        rate = by_key.get((workload, "msgs_per_s"))
        if metric != CLIENT_CPU or row.ours is None or not row.ours[0] or rate is None:
            continue
        bound = cpus * 1e6 / row.ours[0]
        line = f"{workload}: the client took {row.ours[0]:.3g} us of CPU a message with ours: on {cpus} CPUs at most "
        line += f"{_fmt(bound)} msg/s"
        if rate.reference is not None and rate.reference[0]:
            line += f", {bound / rate.reference[0]:.2f}x the reference's {_fmt(rate.reference[0])}"
        lines.append(line + " (with a broker that cost nothing)")
    return lines
