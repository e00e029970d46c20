"""bench/vs_auth.py's pure parts: the pairing of rounds, the ratios, the table and the command line (the
benchmark itself needs the Java client and minutes of the machine: a command, never run by the tests)."""

from __future__ import annotations

import pytest

from bench.vs_auth import AuthSample, auth_keys, render, summarize
from bench.vs_rocketmq import parse_args


def _s(
    rnd: int,
    side: str,
    rate: float,
    workload: str = "W1",
    client: str = "java",
    load: float = 1.0,
    broker: str = "ours",
) -> AuthSample:
    return AuthSample(rnd, broker, side, workload, client, rate, 1.0, 2.0, 0, load)


def test_rounds_pair_on_with_off_and_the_ratio_is_per_round() -> None:
    samples = [
        _s(0, "off", 1000), _s(0, "on", 900, load=3.5),
        _s(1, "on", 700), _s(1, "off", 1000),
        _s(2, "off", 2000), _s(2, "on", 1900),
        _s(3, "off", 500),  # no "on" in round 3: not paired
        _s(0, "off", 100, client="python"), _s(0, "on", 50, client="python"),
    ]  # fmt: skip
    rows = {(r.workload, r.client): r for r in summarize(samples)}
    java = rows[("W1", "java")]
    assert java.broker == "ours"
    assert java.rounds == 3
    assert java.off == (1000, 1000, 2000) and java.on == (900, 700, 1900)
    assert java.ratio == pytest.approx((0.9, 0.7, 0.95))
    assert java.load == (1.0, 3.5)
    assert rows[("W1", "python")].ratio == pytest.approx((0.5, 0.5, 0.5))
    table = render(list(rows.values()))
    row = "| ours | W1 (64 senders) | java | 3 | 1,000 [1,000-2,000] | 900 [700-1,900] | 0.900 [0.700-0.950] | 10.0% |"
    assert row in table


def test_each_broker_pairs_its_own_sides() -> None:
    samples = [
        _s(0, "off", 1000), _s(0, "on", 900),
        _s(0, "off", 800, broker="reference"), _s(0, "on", 600, broker="reference"),
        _s(1, "on", 700, broker="reference"),  # no "off" of the reference in round 1: not paired
        _s(1, "off", 1000),
    ]  # fmt: skip
    rows = {r.broker: r for r in summarize(samples)}
    assert rows["ours"].ratio == pytest.approx((0.9, 0.9, 0.9)) and rows["ours"].rounds == 1
    assert rows["reference"].ratio == pytest.approx((0.75, 0.75, 0.75)) and rows["reference"].rounds == 1
    assert "| Apache RocketMQ | W1 (64 senders) | java | 1 | 800 [800-800] | 600 [600-600] |" in render(
        list(rows.values())
    )


def test_the_signed_side_gives_its_own_ratio_to_off() -> None:
    samples = [_s(0, "off", 1000), _s(0, "signed", 950), _s(0, "on", 800), _s(1, "off", 1000), _s(1, "on", 900)]
    (row,) = summarize(samples)
    assert row.signed_ratio == pytest.approx((0.95, 0.95, 0.95)) and row.ratio == pytest.approx((0.85, 0.8, 0.9))
    assert "| 0.950 [0.950-0.950] |" in render([row]) and "clients signing" in render([row])


def test_a_row_needs_both_sides_of_a_round() -> None:
    assert summarize([_s(0, "off", 1000), _s(1, "on", 900)]) == []
    assert summarize([_s(0, "off", 0), _s(0, "on", 900)]) == []  # an off run that sent nothing: no ratio


def test_the_secured_side_turns_acl_2_on_with_a_super_user() -> None:
    keys = auth_keys()
    assert keys["authenticationEnabled"] == "true" and keys["authorizationEnabled"] == "true"
    assert '"username":"bench-root"' in str(keys["initAuthenticationUser"])
    assert "authenticationMetadataProvider" not in keys
    # Apache RocketMQ refuses every request without its metadata providers
    reference = auth_keys("reference")
    assert reference["authenticationMetadataProvider"] == (
        "org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider"
    )
    assert reference["authorizationMetadataProvider"] == (
        "org.apache.rocketmq.auth.authorization.provider.LocalAuthorizationMetadataProvider"
    )


def test_the_command_line_of_auth() -> None:
    args = parse_args(["--auth"])
    assert args.auth and args.workloads == ["W1", "W3"] and args.kinds == ("ours",)
    assert parse_args(["--auth", "--brokers", "both"]).kinds == ("ours", "reference")
    assert parse_args(["--auth", "--brokers", "reference"]).kinds == ("reference",)
    assert parse_args([]).kinds == ("ours", "reference")
    args = parse_args(["--auth", "--workloads", "W2", "--set", "authenticationStrategy=StatefulAuthenticationStrategy"])
    assert args.workloads == ["W2"] and args.set == ["authenticationStrategy=StatefulAuthenticationStrategy"]
    assert parse_args([]).workloads[0] == "W1" and not parse_args([]).auth
    assert parse_args(["--auth", "--auth-signed"]).auth_signed
    for bad in (["--auth", "--workloads", "W4"], ["--set", "a=b"], ["--auth", "--set", "novalue"], ["--auth-signed"]):
        with pytest.raises(SystemExit):
            parse_args(bad)
