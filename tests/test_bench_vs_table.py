"""The pure parts of bench/vs_rocketmq.py (bench/vs_table.py): broker.conf generation and the ratio table.
Nothing here starts Apache RocketMQ or needs Java; the benchmark itself is never run by the tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.vs_table import (
    CLIENT_CPU,
    Sample,
    broker_props,
    client_bounds,
    conf_text,
    disk_shortfall,
    lower_is_better,
    namesrv_props,
    render,
    summarize,
)


def test_master_conf_has_apache_rocketmq_keys_and_the_workload_settings() -> None:
    props = broker_props(root=Path("/s/m"), listen_port=20911, namesrv="127.0.0.1:9876", flush="SYNC_FLUSH")
    assert props["brokerRole"] == "ASYNC_MASTER"
    assert props["flushDiskType"] == "SYNC_FLUSH"
    assert props["brokerId"] == 0
    assert props["haListenPort"] == 20912
    assert props["storePathCommitLog"] == Path("/s/m/store/commitlog")
    assert "haMasterAddress" not in props and "inSyncReplicas" not in props
    text = conf_text(props)
    assert text.startswith("brokerClusterName=VsCluster\n")
    assert "listenPort=20911\n" in text
    assert "namesrvAddr=127.0.0.1:9876\n" in text


def test_a_sync_master_waits_for_its_slave_on_both_brokers() -> None:
    props = broker_props(root=Path("/s/m"), listen_port=20911, namesrv="n:1", role="SYNC_MASTER")
    assert (props["brokerRole"], props["inSyncReplicas"]) == ("SYNC_MASTER", 2)


def test_a_slave_conf_names_no_master_ha_address() -> None:
    props = broker_props(root=Path("/s/s"), listen_port=30911, namesrv="n:1", role="SLAVE")
    assert (props["brokerId"], props["brokerRole"], props["brokerIP2"]) == (1, "SLAVE", "127.0.0.1")
    assert "haMasterAddress" not in props  # learnt from the registration, as both brokers do


@pytest.mark.parametrize(
    "kwargs",
    [{"flush": "FAST_FLUSH"}, {"role": "MASTER"}],
)
def test_bad_settings_are_refused(kwargs: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        broker_props(root=Path("/s"), listen_port=1, namesrv="n:1", **kwargs)


def test_namesrv_props() -> None:
    assert conf_text(namesrv_props(9876, Path("/ns"))) == (
        "listenPort=9876\nbindAddress=127.0.0.1\nkvConfigPath=/ns/kvConfig.json\n"
    )


def test_summary_gives_medians_ranges_and_ratios_per_workload_in_first_seen_order() -> None:
    samples = [
        Sample(0, "ours", "W1", "msgs_per_s", 100.0),
        Sample(0, "reference", "W1", "msgs_per_s", 50.0),
        Sample(1, "reference", "W1", "msgs_per_s", 80.0),
        Sample(1, "ours", "W1", "msgs_per_s", 120.0),
        Sample(2, "ours", "W1", "msgs_per_s", 90.0),
        Sample(2, "reference", "W1", "msgs_per_s", 60.0),
        Sample(0, "ours", "ready", "ready_s", 0.5),
    ]
    w1, ready = summarize(samples)
    assert (w1.workload, w1.metric) == ("W1", "msgs_per_s")
    assert w1.ours == (100.0, 90.0, 120.0)
    assert w1.reference == (60.0, 50.0, 80.0)
    assert w1.ratio == pytest.approx(100 / 60)
    assert w1.ratio_range == pytest.approx((1.5, 2.0))  # per round: 2.0, 1.5, 1.5
    assert not w1.lower_is_better
    # A metric only one broker has: no ratio, and the table says so.
    assert (ready.reference, ready.ratio, ready.ratio_range, ready.lower_is_better) == (None, None, None, True)
    header, row_w1, row_ready = render([w1, ready])
    assert header[:5] == ["workload", "metric", "ours", "reference", "ours/ref"]
    assert row_w1 == ["W1", "msgs_per_s", "100 [90.0-120]", "60.0 [50.0-80.0]", "1.67", "1.50-2.00", "higher"]
    assert row_ready == ["ready", "ready_s", "0.5", "-", "-", "-", "lower"]


def test_only_rates_are_better_higher() -> None:
    assert not lower_is_better("msgs_per_s")
    assert all(lower_is_better(m) for m in ("p50_ms", "p99_ms", "rss_mib", "own_mib", "ready_s"))


def test_client_bounds_turn_the_clients_cpu_a_message_into_the_highest_rate_and_ratio_the_host_allows() -> None:
    samples = [
        Sample(1, "ours", "W3", "msgs_per_s", 100_000.0),
        Sample(1, "reference", "W3", "msgs_per_s", 80_000.0),
        Sample(1, "ours", "W3", CLIENT_CPU, 10.0),  # 10 us a message: 2 CPUs allow 200k msg/s
        Sample(1, "reference", "W3", CLIENT_CPU, 12.0),
        Sample(1, "ours", "W4 drain", "msgs_per_s", 50_000.0),
        Sample(1, "ours", "W4 drain", CLIENT_CPU, 4.0),  # no reference: the bound without a ratio
        Sample(1, "ours", "W1", "msgs_per_s", 30_000.0),  # no CPU figure: no line
    ]
    lines = client_bounds(summarize(samples), cpus=2)
    assert lines == [
        "W3: the client took 10 us of CPU a message with ours: on 2 CPUs at most 200,000 msg/s, 2.50x the "
        "reference's 80,000 (with a broker that cost nothing)",
        "W4 drain: the client took 4 us of CPU a message with ours: on 2 CPUs at most 500,000 msg/s (with a broker "
        "that cost nothing)",
    ]


GIB = 1 << 30


@pytest.mark.parametrize(
    ("used", "usable", "need", "starts"),
    [
        (10 * GIB, 100 * GIB, 3 * GIB, True),  # 13% after
        (70 * GIB, 100 * GIB, 5 * GIB, True),  # exactly 75% after
        (70 * GIB, 100 * GIB, 6 * GIB, False),  # 76%: past diskMaxUsedSpaceRatio
        (82 * GIB, 92 * GIB, 3 * GIB, False),  # already past it (df: 89%)
    ],
)
def test_a_run_starts_only_while_its_stores_keep_the_disk_below_the_cleaning_ratio(
    used: int, usable: int, need: int, starts: bool
) -> None:
    problem = disk_shortfall(used, usable, need)
    assert (problem is None) == starts
    if problem:
        assert "diskMaxUsedSpaceRatio" in problem and "--dir" in problem
