"""Option parsing of the rocketmq source and sink, by table (pure: no Spark, no broker)."""

from __future__ import annotations

from typing import Any

import pytest

from broker.spark.options import OptionError, sink_options, source_options

ENV = {"NAMESRV_ADDR": "ns-from-env:9876"}


@pytest.mark.parametrize(
    ("options", "streaming", "expected"),
    [
        # Kafka-like defaults: a batch reads earliest..latest, a new stream starts at latest.
        (
            {"topic": "T"},
            False,
            {"topics": ("T",), "starting": "earliest", "ending": "latest", "namesrv": "ns-from-env:9876"},
        ),
        ({"topic": "T"}, True, {"starting": "latest", "max_offsets_per_trigger": None, "progress_group": None}),
        # Keys are case-insensitive; a topic list is de-duplicated and sorted.
        ({"TOPIC": "b, a,b", "NameServer": "h:1;h:2"}, False, {"topics": ("a", "b"), "namesrv": "h:1;h:2"}),
        ({"topic": "T", "startingOffsets": "LATEST", "endingOffsets": "latest"}, False, {"starting": "latest"}),
        (
            {"topic": "T", "startingOffsets": '{"T": {"b/1": 5, "a/0": -2}}'},
            False,
            {"starting": {"T": {"a/0": -2, "b/1": 5}}},
        ),
        ({"topic": "T", "endingOffsets": '{"T": {"a/0": -1}}'}, False, {"ending": {"T": {"a/0": -1}}}),
        ({"topic": "T", "startingTimestamp": "1700000000000"}, False, {"starting_timestamp": 1700000000000}),
        (
            {"topic": "T", "startingTimestamp": "1700000000000", "endingTimestamp": "1700000060000"},
            False,
            {"starting_timestamp": 1700000000000, "ending_timestamp": 1700000060000},
        ),
        ({"topic": "T"}, False, {"starting_timestamp": None, "ending_timestamp": None}),
        ({"topic": "T", "subExpression": "A || B"}, False, {"sub_expression": "A || B"}),
        ({"topic": "T", "failOnDataLoss": "False"}, False, {"fail_on_data_loss": False}),
        ({"topic": "T", "maxRecordsPerPartition": "100"}, False, {"max_records_per_partition": 100}),
        ({"topic": "T"}, True, {"max_partitions": None}),
        ({"topic": "T", "maxPartitions": "2"}, True, {"max_partitions": 2}),
        ({"topic": "T", "maxOffsetsPerTrigger": "7"}, True, {"max_offsets_per_trigger": 7}),
        ({"topic": "T", "progressGroup": "g1"}, True, {"progress_group": "g1"}),
        (
            {"topic": "T", "pullTimeoutMs": "1500", "pullBatchSize": "64"},
            False,
            {"pull_timeout": 1.5, "pull_batch_size": 64},
        ),
        # Spark adds its own keys to streaming options; they are not ours to reject.
        ({"topic": "T", "path": "/x", "checkpointLocation": "/c"}, True, {"topics": ("T",)}),
    ],
)
def test_source_options(options: dict[str, str], streaming: bool, expected: dict[str, Any]) -> None:
    opts = source_options(options, streaming=streaming, env=ENV)
    for field, value in expected.items():
        assert getattr(opts, field) == value, field


@pytest.mark.parametrize(
    ("options", "streaming", "message"),
    [
        ({}, False, "option topic is required"),
        ({"topic": " , "}, False, "option topic is required"),
        ({"topic": "T", "startingOffset": "earliest"}, False, "unknown source option(s) startingoffset"),
        ({"topic": "T", "startingOffsets": "first"}, False, "startingOffsets must be earliest, latest or JSON"),
        ({"topic": "T", "startingOffsets": '{"U": {"a/0": 1}}'}, False, "names topic 'U'"),
        ({"topic": "T", "startingOffsets": '{"T": {"a": 1}}'}, False, "is not <brokerName>/<queueId>"),
        ({"topic": "T", "startingOffsets": '{"T": {"a/0": -3}}'}, False, "must be an offset >= 0"),
        ({"topic": "T", "startingOffsets": '{"T": {"a/0": "5"}}'}, False, "must be an offset >= 0"),
        ({"topic": "T", "startingOffsets": "[1]"}, False, "must be an object keyed by topic"),
        ({"topic": "T", "endingOffsets": "earliest"}, False, "earliest (-2) is not allowed"),
        ({"topic": "T", "endingOffsets": '{"T": {"a/0": -2}}'}, False, "earliest (-2) is not allowed"),
        ({"topic": "T", "endingOffsets": "latest"}, True, "endingOffsets applies to batch reads only"),
        ({"topic": "T", "endingTimestamp": "1700000000000"}, True, "endingTimestamp applies to batch reads only"),
        (
            {"topic": "T", "startingTimestamp": "1700000000001", "endingTimestamp": "1700000000000"},
            False,
            "endingTimestamp 1700000000000 is before startingTimestamp 1700000000001",
        ),
        ({"topic": "T", "endingTimestamp": "-5"}, False, "option endingtimestamp must be >= 0"),
        ({"topic": "T", "maxOffsetsPerTrigger": "5"}, False, "applies to streaming reads only"),
        ({"topic": "T", "progressGroup": "g"}, False, "applies to streaming reads only"),
        ({"topic": "T", "maxOffsetsPerTrigger": "0"}, True, "must be >= 1"),
        ({"topic": "T", "maxRecordsPerPartition": "ten"}, False, "must be an integer"),
        ({"topic": "T", "failOnDataLoss": "maybe"}, False, "must be true or false"),
    ],
)
def test_source_option_errors(options: dict[str, str], streaming: bool, message: str) -> None:
    with pytest.raises(OptionError) as err:
        source_options(options, streaming=streaming, env=ENV)
    assert message in str(err.value)


def test_nameserver_option_wins_over_env_and_one_is_required() -> None:
    assert source_options({"topic": "T", "nameServer": "a:1"}, streaming=False, env=ENV).namesrv == "a:1"
    with pytest.raises(OptionError, match="NAMESRV_ADDR"):
        source_options({"topic": "T"}, streaming=False, env={})


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({}, {"topic": None, "producer_group": "spark-rocketmq-writer", "max_in_flight": 256, "send_timeout": 10.0}),
        (
            {"Topic": "T", "maxInFlight": "32", "sendTimeoutMs": "2500"},
            {"topic": "T", "max_in_flight": 32, "send_timeout": 2.5},
        ),
        ({"producerGroup": "pg", "checkpointLocation": "/c"}, {"producer_group": "pg"}),
    ],
)
def test_sink_options(options: dict[str, str], expected: dict[str, Any]) -> None:
    opts = sink_options(options, env=ENV)
    assert opts.namesrv == "ns-from-env:9876"
    for field, value in expected.items():
        assert getattr(opts, field) == value, field


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"topic": "a,b"}, "names one topic"),
        ({"subExpression": "A"}, "unknown sink option(s) subexpression"),
        ({"maxInFlight": "0"}, "must be >= 1"),
    ],
)
def test_sink_option_errors(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError) as err:
        sink_options(options, env=ENV)
    assert message in str(err.value)


def test_tls_options_for_the_source_and_the_sink() -> None:
    from broker.spark.options import NO_TLS, SparkTls

    base = {"topic": "T", "nameServer": "ns:9876"}
    assert source_options(base, streaming=False).tls == NO_TLS
    opts = source_options({**base, "tlsCaFile": "/ca.pem"}, streaming=True)
    assert opts.tls == SparkTls(True, "/ca.pem")
    assert opts.tls.client_settings()["use_tls"] is True and opts.tls.client_settings()["tls_verify"] is True
    sink = sink_options({**base, "tls": "true", "tlsInsecure": "true"})
    assert sink.tls.enabled and sink.tls.client_settings()["tls_verify"] is False
    assert not sink_options({**base, "tls": "false"}).tls.enabled
    with pytest.raises(OptionError, match="tlsKeyFile needs tlsCertFile"):
        sink_options({**base, "tlsKeyFile": "/k.pem"})
