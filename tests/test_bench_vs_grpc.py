"""The pure parts of bench/vs_grpc.py: the gRPC keys of our broker.conf, Apache RocketMQ's rmq-proxy.json, the command
line, and the ratio table of its samples. Nothing here starts a broker, a proxy or a JVM; the benchmark itself is
never run by the tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.vs_grpc import parse_args
from bench.vs_table import CLUSTER_NAME, Sample, broker_props, conf_text, grpc_props, proxy_config, render, summarize


def test_grpc_props_turn_our_endpoint_on_in_broker_conf() -> None:
    props = broker_props(root=Path("/s"), listen_port=20911, namesrv="127.0.0.1:9876")
    props.update(grpc_props(28081))
    text = conf_text(props)
    assert text.endswith("enableProxy=true\ngrpcServerPort=28081\n")


@pytest.mark.parametrize("port", [0, -1, 65536])
def test_grpc_port_out_of_range_is_refused(port: int) -> None:
    with pytest.raises(ValueError, match="grpcServerPort"):
        grpc_props(port)


def test_proxy_config_is_local_mode_on_the_benchmark_cluster() -> None:
    conf = proxy_config(grpc_port=28081, remoting_port=28080, namesrv="127.0.0.1:9876")
    assert conf == {
        "rocketMQClusterName": CLUSTER_NAME,  # the cluster broker_props registers, so the proxy routes to it
        "proxyMode": "LOCAL",
        "namesrvAddr": "127.0.0.1:9876",
        "grpcServerPort": 28081,
        "remotingListenPort": 28080,
    }


@pytest.mark.parametrize(
    ("grpc_port", "remoting_port", "message"),
    [(0, 28080, "grpcServerPort"), (28081, 70000, "remotingListenPort"), (28081, 28081, "must differ")],
)
def test_bad_proxy_ports_are_refused(grpc_port: int, remoting_port: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        proxy_config(grpc_port=grpc_port, remoting_port=remoting_port, namesrv="n:1")


def test_command_line_defaults_run_every_workload_with_both_sdks_on_both_brokers() -> None:
    args = parse_args([])
    assert args.workloads == ["G1", "G2", "G3"]
    assert args.clients == ("java", "python")
    assert args.kinds == ("ours", "reference")
    assert (args.senders, args.backlog, args.drain_threads) == (64, 100_000, 4)


def test_command_line_narrows_workloads_clients_and_brokers() -> None:
    args = parse_args(["--workloads", "G2, G3", "--client", "python", "--brokers", "reference", "--senders", "8"])
    assert (args.workloads, args.clients, args.kinds, args.senders) == (["G2", "G3"], ("python",), ("reference",), 8)


@pytest.mark.parametrize(
    "argv",
    [
        ["--workloads", "G1,W1"],
        ["--client", "go"],
        ["--rounds", "0"],
        ["--senders", "0"],
        ["--drain-threads", "0"],
        ["--warmup", "-1"],
        ["--backlog", "31"],
    ],
)
def test_bad_command_lines_are_refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(argv)
    assert exc.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_table_of_grpc_samples_pairs_rounds_per_client() -> None:
    samples = [
        Sample(0, "ours", "G1 java", "msgs_per_s", 900.0),
        Sample(0, "reference", "G1 java", "msgs_per_s", 450.0),
        Sample(1, "reference", "G1 java", "msgs_per_s", 600.0),
        Sample(1, "ours", "G1 java", "msgs_per_s", 900.0),
        Sample(0, "ours", "G1 python", "p99_ms", 10.0),
        Sample(0, "reference", "G1 python", "p99_ms", 20.0),
        Sample(0, "reference", "G3 drain python", "msgs_per_s", 800.0),
    ]
    header, java, python, drain = render(summarize(samples))
    assert header[2:5] == ["ours", "reference", "ours/ref"]
    assert java == ["G1 java", "msgs_per_s", "900", "525 [450-600]", "1.71", "1.50-2.00", "higher"]
    assert python == ["G1 python", "p99_ms", "10.0", "20.0", "0.50", "0.50-0.50", "lower"]
    # a drain that only the reference finished: its cell, and no ratio
    assert drain == ["G3 drain python", "msgs_per_s", "-", "800", "-", "-", "higher"]
