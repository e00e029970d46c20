"""The pure parts of bench/cost_growth.py: its measured points, the ratio table, and the soak's summary.

Nothing here starts a process, so tests/test_bench_cost_table.py checks it without Java.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

__all__ = [
    "PARTS",
    "MemorySample",
    "Point",
    "Row",
    "cpu_us_per_msg",
    "markdown",
    "parse_counts",
    "rows",
    "soak_markdown",
    "soak_rate",
    "table_cells",
]

#: What each part varies, as a column heading.
PARTS = {
    "size": "body size (B)",
    "topics": "topics of 8 queues",
    "groups": "consumer groups reading one topic",
}
_SUFFIXES = {"k": 1 << 10, "m": 1 << 20}


def parse_counts(text: str, low: int = 1, high: int = 1 << 30) -> list[int]:
    """'128,1k,64k' -> [128, 1024, 65536]: a comma list of positive integers (k and m are 2**10 and 2**20),
    each in [low, high]; ValueError naming the bad item."""
    found = []
    for item in (part.strip().lower() for part in text.split(",")):
        if not item:
            continue
        scale = _SUFFIXES.get(item[-1], 1)
        digits = item[:-1] if scale > 1 else item
        if not digits.isdigit():
            raise ValueError(f"{item!r} is not a count (digits, optionally followed by k or m)")
        value = int(digits) * scale
        if not low <= value <= high:
            raise ValueError(f"{item!r}: {low} to {high}")
        found.append(value)
    if not found:
        raise ValueError("an empty list")
    return found


def cpu_us_per_msg(cpu_before_s: float, cpu_after_s: float, messages: int) -> float:
    """Broker CPU (utime + stime) per message, in microseconds; 0 when nothing was sent."""
    return (cpu_after_s - cpu_before_s) * 1e6 / messages if messages > 0 else 0.0


@dataclass(frozen=True)
class Point:
    """One measurement: broker "ours" or "reference", part (a key of PARTS) at x (bytes, topics, groups)."""

    part: str
    x: int
    broker: str
    msgs_per_s: float
    cpu_us_per_msg: float
    messages: int

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class Row:
    """Both brokers at one x of one part, and ours / reference of the rate and of the CPU per message."""

    part: str
    x: int
    ours: Point | None
    reference: Point | None

    @property
    def rate_ratio(self) -> float | None:
        if self.ours is None or self.reference is None or not self.reference.msgs_per_s:
            return None
        return self.ours.msgs_per_s / self.reference.msgs_per_s

    @property
    def cpu_ratio(self) -> float | None:
        if self.ours is None or self.reference is None or not self.reference.cpu_us_per_msg:
            return None
        return self.ours.cpu_us_per_msg / self.reference.cpu_us_per_msg


def rows(points: Iterable[Point]) -> list[Row]:
    """One Row per (part, x), parts in PARTS order and x ascending; a later point of the same key and broker
    replaces an earlier one."""
    by_key: dict[tuple[str, int], dict[str, Point]] = {}
    for p in points:
        by_key.setdefault((p.part, p.x), {})[p.broker] = p
    order = list(PARTS)
    keys = sorted(by_key, key=lambda k: (order.index(k[0]) if k[0] in order else len(order), k[1]))
    return [Row(part, x, by_key[(part, x)].get("ours"), by_key[(part, x)].get("reference")) for part, x in keys]


def _num(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def table_cells(found: Sequence[Row]) -> list[list[str]]:
    """The table as rows of strings, the header first (for markdown and for the terminal)."""
    cells = [
        [
            "part",
            "x",
            "ours msg/s",
            "ref msg/s",
            "ours / ref",
            "ours CPU us/msg",
            "ref CPU us/msg",
            "ours / ref (CPU)",
        ]
    ]
    for r in found:
        ours, ref = r.ours, r.reference
        cells.append(
            [
                PARTS.get(r.part, r.part),
                str(r.x),
                _num(ours.msgs_per_s if ours else None),
                _num(ref.msgs_per_s if ref else None),
                _ratio(r.rate_ratio),
                _num(ours.cpu_us_per_msg if ours else None, 1),
                _num(ref.cpu_us_per_msg if ref else None, 1),
                _ratio(r.cpu_ratio),
            ]
        )
    return cells


def markdown(found: Sequence[Row]) -> str:
    cells = table_cells(found)
    lines = ["| " + " | ".join(cells[0]) + " |", "|---|" + "---:|" * (len(cells[0]) - 1)]
    lines += ["| " + " | ".join(line) + " |" for line in cells[1:]]
    return "\n".join(lines)


@dataclass(frozen=True)
class MemorySample:
    """NameServer + broker (with our helper processes) memory at `t_s` seconds into a soak, in MiB."""

    broker: str
    t_s: float
    rss_mib: float
    own_mib: float
    pss_mib: float

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def soak_rate(w1_rates: Iterable[float], fraction: float = 0.5) -> float:
    """The soak's send rate: `fraction` of the slower broker's W1 rate, so that both do the same work and
    neither runs at its limit. ValueError without a positive rate."""
    positive = [r for r in w1_rates if r > 0]
    if not positive:
        raise ValueError("no broker reached a W1 rate to pace the soak from")
    return fraction * min(positive)


def soak_markdown(samples: Sequence[MemorySample]) -> str:
    """Per broker: memory at the first and last sample and the highest, VmRSS / own / PSS."""
    lines = [
        "| broker | minutes | VmRSS first / last / max MiB | own first / last / max | PSS first / last / max |",
        "|---|---:|---:|---:|---:|",
    ]
    for broker in ("ours", "reference"):
        mine = [s for s in samples if s.broker == broker]
        if not mine:
            continue
        first, last = mine[0], mine[-1]
        cols = []
        for field in ("rss_mib", "own_mib", "pss_mib"):
            values = [getattr(s, field) for s in mine]
            cols.append(f"{getattr(first, field):.0f} / {getattr(last, field):.0f} / {max(values):.0f}")
        lines.append(f"| {broker} | {last.t_s / 60:.1f} | " + " | ".join(cols) + " |")
    return "\n".join(lines)
