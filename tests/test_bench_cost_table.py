"""The pure parts of bench/cost_growth.py (bench/cost_table.py), its option parsing and its plots. Nothing
here starts a broker or needs Java; the benchmark itself is never run by the tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.cost_growth import _plan, parse_args
from bench.cost_table import (
    MemorySample,
    Point,
    cpu_us_per_msg,
    markdown,
    parse_counts,
    rows,
    soak_markdown,
    soak_rate,
)


def test_counts_take_k_and_m_suffixes() -> None:
    assert parse_counts("128, 1k,64K,1m") == [128, 1024, 65536, 1 << 20]


@pytest.mark.parametrize("text", ["", "1,x", "-5", "0", "2k5", "1.5k", "99999999999"])
def test_bad_counts_are_refused_with_the_item(text: str) -> None:
    with pytest.raises(ValueError):
        parse_counts(text, 1, 1 << 30)


def test_cpu_per_message_in_microseconds() -> None:
    assert cpu_us_per_msg(10.0, 12.5, 100_000) == pytest.approx(25.0)
    assert cpu_us_per_msg(1.0, 2.0, 0) == 0.0


def _point(part: str, x: int, broker: str, rate: float, cpu: float) -> Point:
    return Point(part, x, broker, rate, cpu, int(rate * 10))


def test_rows_pair_the_brokers_per_point_in_part_order() -> None:
    points = [
        _point("groups", 4, "ours", 300.0, 5.0),
        _point("size", 1024, "reference", 100.0, 20.0),
        _point("size", 128, "ours", 400.0, 8.0),
        _point("size", 1024, "ours", 150.0, 10.0),
    ]
    found = rows(points)
    assert [(r.part, r.x) for r in found] == [("size", 128), ("size", 1024), ("groups", 4)]
    assert found[0].rate_ratio is None  # no reference point at 128 B
    assert found[1].rate_ratio == pytest.approx(1.5)
    assert found[1].cpu_ratio == pytest.approx(0.5)
    table = markdown(found)
    assert table.splitlines()[0].startswith("| part | x | ours msg/s |")
    assert "| body size (B) | 1024 | 150 | 100 | 1.50 | 10.0 | 20.0 | 0.50 |" in table


def test_soak_rate_is_half_the_slower_broker() -> None:
    assert soak_rate([20_000.0, 11_000.0]) == 5_500.0
    assert soak_rate([0.0, 8_000.0]) == 4_000.0
    with pytest.raises(ValueError):
        soak_rate([0.0])


def test_soak_table_gives_first_last_and_highest() -> None:
    samples = [
        MemorySample("ours", 0.0, 100.0, 60.0, 70.0),
        MemorySample("ours", 60.0, 120.0, 61.0, 80.0),
        MemorySample("ours", 120.0, 110.0, 62.0, 75.0),
    ]
    table = soak_markdown(samples)
    assert "| ours | 2.0 | 100 / 110 / 120 | 60 / 62 / 62 | 70 / 75 / 80 |" in table
    assert "reference" not in table


def test_options_are_checked_and_parts_alternate_their_first_broker() -> None:
    args = parse_args(["--parts", "size,groups", "--sizes", "128,64k", "--backlog", "20k"])
    assert (args.sizes, args.backlog, args.mode) == ([128, 65536], 20480, "sweep")
    assert _plan(args) == [("size", "ours"), ("size", "reference"), ("groups", "reference"), ("groups", "ours")]
    for bad in (["--parts", "size,cpu"], ["--sizes", "0"], ["--groups", "100"], ["--seconds", "0"]):
        with pytest.raises(SystemExit):
            parse_args(bad)


def test_plots_are_small_pngs(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the plots need the bench extra (matplotlib)")
    from bench.cost_plots import plot_soak, plot_sweeps

    points = [
        _point("size", x, b, 1000.0 / (i + 1), 10.0 * (i + 1))
        for i, x in enumerate((128, 1024))
        for b in ("ours", "reference")
    ]
    sweep = plot_sweeps(points, tmp_path / "s.png")
    soak = plot_soak([MemorySample("ours", t, 100.0, 60.0, 70.0) for t in (0.0, 10.0)], tmp_path / "m.png")
    for path in (sweep, soak):
        assert path is not None and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert path.stat().st_size < 100_000
    assert plot_sweeps([], tmp_path / "none.png") is None
