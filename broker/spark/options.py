"""Parsing of the `rocketmq` data source options into typed settings. Pure: no Spark, no I/O.

`RocketMQDataSource` (source.py) calls `source_options()` when Spark asks it for a reader or stream
reader and `sink_options()` for a writer. Spark hands options over as a case-insensitive dict of
strings; we lower-case keys ourselves as well, so these functions take any plain mapping and are
tested by table. A bad or unknown option raises `OptionError` naming it, at planning time on the
driver rather than later inside an executor.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from broker.spark.offsets import EARLIEST, OffsetSpec, parse_offset_spec

__all__ = [
    "DEFAULT_PULL_GROUP",
    "DEFAULT_WRITER_GROUP",
    "NAMESRV_ENV",
    "NO_TLS",
    "OptionError",
    "SinkOptions",
    "SourceOptions",
    "SparkTls",
    "sink_options",
    "source_options",
]

NAMESRV_ENV = "NAMESRV_ADDR"
DEFAULT_PULL_GROUP = "spark-rocketmq-reader"
DEFAULT_WRITER_GROUP = "spark-rocketmq-writer"

# Keys Spark itself may put into the options map next to ours (file-sink style and query options).
_SPARK_OWNED = frozenset({"path", "checkpointlocation", "queryname"})

_SOURCE_KEYS = frozenset(
    {
        "topic",
        "nameserver",
        "startingoffsets",
        "endingoffsets",
        "startingtimestamp",
        "endingtimestamp",
        "subexpression",
        "failondataloss",
        "maxrecordsperpartition",
        "maxpartitions",
        "maxoffsetspertrigger",
        "group",
        "progressgroup",
        "pullbatchsize",
        "pulltimeoutms",
    }
)
# TLS to the NameServers and brokers, for the source and the sink alike (ClientConfig.use_tls and its files)
# and ACL credentials (accessKey/secretKey: ClientConfig.access_key/secret_key, every request signed)
_TLS_KEYS = frozenset({"tls", "tlscafile", "tlscertfile", "tlskeyfile", "tlsinsecure", "accesskey", "secretkey"})
_SOURCE_KEYS = _SOURCE_KEYS | _TLS_KEYS
_SINK_KEYS = frozenset({"topic", "nameserver", "producergroup", "maxinflight", "sendtimeoutms"}) | _TLS_KEYS


class OptionError(ValueError):
    """An option of the rocketmq source or sink is missing, unknown or malformed."""


@dataclass(frozen=True, slots=True)
class SparkTls:
    """Options tls (true/false), tlsCaFile, tlsCertFile, tlsKeyFile, tlsInsecure: the client's TLS settings
    (broker.client.config.ClientConfig); any file or tlsInsecure implies tls. Hashable: part of client keys."""

    enabled: bool = False
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure: bool = False
    #: Options accessKey and secretKey (ACL): the connection settings carry them too; never shown in a repr.
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)

    def client_settings(self) -> dict[str, Any]:
        """ClientConfig keyword arguments."""
        signed: dict[str, Any] = {}
        if self.access_key and self.secret_key:
            signed = {"access_key": self.access_key, "secret_key": self.secret_key}
        if not self.enabled:
            return signed
        return {
            **signed,
            "use_tls": True,
            "tls_ca_file": self.ca_file,
            "tls_cert_file": self.cert_file,
            "tls_key_file": self.key_file,
            "tls_verify": not self.insecure,
        }


NO_TLS = SparkTls()


def _tls(opts: Mapping[str, str]) -> SparkTls:
    files = {key: (opts.get(key) or "").strip() or None for key in ("tlscafile", "tlscertfile", "tlskeyfile")}
    insecure = _bool(opts, "tlsinsecure", False)
    enabled = _bool(opts, "tls", insecure or any(files.values()))
    if files["tlskeyfile"] and not files["tlscertfile"]:
        raise OptionError("option tlsKeyFile needs tlsCertFile")
    access_key = (opts.get("accesskey") or "").strip() or None
    secret_key = (opts.get("secretkey") or "").strip() or None
    if (access_key is None) != (secret_key is None):
        raise OptionError("options accessKey and secretKey go together")
    return SparkTls(
        enabled, files["tlscafile"], files["tlscertfile"], files["tlskeyfile"], insecure, access_key, secret_key
    )


@dataclass(frozen=True, slots=True)
class SourceOptions:
    topics: tuple[str, ...]
    namesrv: str
    starting: OffsetSpec
    ending: OffsetSpec
    starting_timestamp: int | None
    #: Batch only: each queue ends before its first message stored at or after this time (exclusive).
    ending_timestamp: int | None
    sub_expression: str
    fail_on_data_loss: bool
    max_records_per_partition: int | None
    #: At most this many partitions (tasks) per batch or micro-batch, each reading several queue ranges.
    max_partitions: int | None
    max_offsets_per_trigger: int | None
    #: Group name carried by pull requests (brokers require one); never committed by the source.
    group: str
    #: When set, the stream reader commits each finished micro-batch's end offsets to this group.
    progress_group: str | None
    pull_batch_size: int
    pull_timeout: float
    tls: SparkTls = SparkTls()


@dataclass(frozen=True, slots=True)
class SinkOptions:
    #: Overrides the `topic` column when set.
    topic: str | None
    namesrv: str
    producer_group: str
    max_in_flight: int
    send_timeout: float
    tls: SparkTls = SparkTls()


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def _reject_unknown(opts: Mapping[str, str], known: frozenset[str], what: str) -> None:
    unknown = sorted(set(opts) - known - _SPARK_OWNED)
    if unknown:
        raise OptionError(f"unknown {what} option(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")


def _int(opts: Mapping[str, str], key: str, default: int | None, *, minimum: int = 1) -> int | None:
    raw = opts.get(key)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise OptionError(f"option {key} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise OptionError(f"option {key} must be >= {minimum}, got {value}")
    return value


def _bool(opts: Mapping[str, str], key: str, default: bool) -> bool:
    raw = opts.get(key)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise OptionError(f"option {key} must be true or false, got {raw!r}")


def _namesrv(opts: Mapping[str, str], env: Mapping[str, str]) -> str:
    # The environment default lets a Spark-on-Kubernetes job be configured by NAMESRV_ADDR alone.
    value = (opts.get("nameserver") or env.get(NAMESRV_ENV) or "").strip()
    if not value:
        raise OptionError(f"option nameServer is required (or set the {NAMESRV_ENV} environment variable)")
    return value


def _topics(opts: Mapping[str, str], *, required: bool) -> tuple[str, ...]:
    raw = opts.get("topic", "")
    topics = tuple(sorted({t.strip() for t in raw.split(",") if t.strip()}))
    if required and not topics:
        raise OptionError("option topic is required (one topic or a comma-separated list)")
    return topics


def source_options(
    options: Mapping[str, str],
    *,
    streaming: bool,
    env: Mapping[str, str] | None = None,
) -> SourceOptions:
    """Settings of a batch (`streaming=False`) or streaming read. Defaults follow the Kafka source:
    a batch reads earliest..latest, a new streaming query starts at latest."""
    opts = _lower(options)
    _reject_unknown(opts, _SOURCE_KEYS, "source")
    topics = _topics(opts, required=True)
    default_start: Literal["earliest", "latest"] = "latest" if streaming else "earliest"
    if streaming and "endingoffsets" in opts:
        raise OptionError("option endingOffsets applies to batch reads only")
    try:
        starting = parse_offset_spec(opts.get("startingoffsets"), default_start, topics, "startingOffsets")
        ending = parse_offset_spec(opts.get("endingoffsets"), "latest", topics, "endingOffsets")
    except ValueError as exc:
        raise OptionError(str(exc)) from None
    if ending == "earliest" or (
        isinstance(ending, dict) and any(v == EARLIEST for q in ending.values() for v in q.values())
    ):
        raise OptionError("endingOffsets must be latest or JSON offsets (-1 = latest); earliest (-2) is not allowed")
    if streaming and "endingtimestamp" in opts:
        raise OptionError("option endingTimestamp applies to batch reads only")
    starting_timestamp = _int(opts, "startingtimestamp", None, minimum=0)
    ending_timestamp = _int(opts, "endingtimestamp", None, minimum=0)
    if starting_timestamp is not None and ending_timestamp is not None and ending_timestamp < starting_timestamp:
        raise OptionError(f"endingTimestamp {ending_timestamp} is before startingTimestamp {starting_timestamp}")
    if not streaming and "maxoffsetspertrigger" in opts:
        raise OptionError("option maxOffsetsPerTrigger applies to streaming reads only")
    if not streaming and "progressgroup" in opts:
        raise OptionError("option progressGroup applies to streaming reads only")
    progress_group = (opts.get("progressgroup") or "").strip() or None
    timeout_ms = _int(opts, "pulltimeoutms", 30_000)
    assert timeout_ms is not None
    return SourceOptions(
        topics=topics,
        namesrv=_namesrv(opts, os.environ if env is None else env),
        starting=starting,
        ending=ending,
        starting_timestamp=starting_timestamp,
        ending_timestamp=ending_timestamp,
        sub_expression=(opts.get("subexpression") or "*").strip() or "*",
        fail_on_data_loss=_bool(opts, "failondataloss", True),
        max_records_per_partition=_int(opts, "maxrecordsperpartition", None),
        max_partitions=_int(opts, "maxpartitions", None),
        max_offsets_per_trigger=_int(opts, "maxoffsetspertrigger", None),
        group=(opts.get("group") or DEFAULT_PULL_GROUP).strip(),
        progress_group=progress_group,
        pull_batch_size=_int(opts, "pullbatchsize", 1024) or 1024,
        pull_timeout=timeout_ms / 1000,
        tls=_tls(opts),
    )


def sink_options(options: Mapping[str, str], *, env: Mapping[str, str] | None = None) -> SinkOptions:
    opts = _lower(options)
    _reject_unknown(opts, _SINK_KEYS, "sink")
    topics = _topics(opts, required=False)
    if len(topics) > 1:
        raise OptionError("the sink's topic option names one topic")
    timeout_ms = _int(opts, "sendtimeoutms", 10_000)
    assert timeout_ms is not None
    return SinkOptions(
        topic=topics[0] if topics else None,
        namesrv=_namesrv(opts, os.environ if env is None else env),
        producer_group=(opts.get("producergroup") or DEFAULT_WRITER_GROUP).strip(),
        max_in_flight=_int(opts, "maxinflight", 256) or 256,
        send_timeout=timeout_ms / 1000,
        tls=_tls(opts),
    )
