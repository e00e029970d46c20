"""The PNG plots of bench/cost_growth.py, drawn with matplotlib (the `bench` extra) off screen.

Small on purpose (a few inches at 80 dpi): they show how the two brokers' costs grow, not fine detail.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.cost_table import PARTS, MemorySample, Point

__all__ = ["plot_soak", "plot_sweeps"]

_STYLE = {"ours": ("tab:blue", "RocketCluster"), "reference": ("tab:orange", "Apache RocketMQ")}
_DPI = 80


def _pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (no display), imported only when a plot is drawn (by name:
    the bench extra is not installed where the rest of the project is type-checked)."""
    try:
        matplotlib = importlib.import_module("matplotlib")
    except ImportError as exc:
        raise SystemExit("the plots need matplotlib: pip install -e '.[bench]' (make bench-cost-growth does)") from exc
    matplotlib.use("Agg")
    return importlib.import_module("matplotlib.pyplot")


def plot_sweeps(points: Sequence[Point], path: Path) -> Path | None:
    """One row per part measured: msg/s and broker CPU per message against x, a line per broker."""
    parts = [part for part in PARTS if any(p.part == part for p in points)]
    if not parts:
        return None
    plt = _pyplot()
    ticker = importlib.import_module("matplotlib.ticker")
    fig, axes = plt.subplots(len(parts), 2, figsize=(8, 2.6 * len(parts)), squeeze=False)
    for row, part in enumerate(parts):
        for col, (field, label) in enumerate((("msgs_per_s", "msg/s"), ("cpu_us_per_msg", "broker CPU us/msg"))):
            ax = axes[row][col]
            for broker, (color, name) in _STYLE.items():
                mine = sorted((p for p in points if p.part == part and p.broker == broker), key=lambda p: p.x)
                if mine:
                    ax.plot([p.x for p in mine], [getattr(p, field) for p in mine], "o-", color=color, label=name)
            ax.set_xscale("log", base=10 if part == "topics" else 2)
            ax.xaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))  # 1024, not 2^10
            ax.set_xlabel(PARTS[part], fontsize=8)
            ax.set_ylabel(label, fontsize=8)
            ax.tick_params(labelsize=7)
            ax.grid(True, alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=_DPI)
    plt.close(fig)
    return path


def plot_soak(samples: Sequence[MemorySample], path: Path) -> Path | None:
    """Memory (VmRSS solid, PSS dashed, own dotted) of NameServer + broker over the soak, a colour a broker."""
    if not samples:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 3))
    for broker, (color, name) in _STYLE.items():
        mine = [s for s in samples if s.broker == broker]
        if not mine:
            continue
        minutes = [s.t_s / 60 for s in mine]
        ax.plot(minutes, [s.rss_mib for s in mine], "-", color=color, label=f"{name} VmRSS")
        ax.plot(minutes, [s.pss_mib for s in mine], "--", color=color, label=f"{name} PSS")
        ax.plot(minutes, [s.own_mib for s in mine], ":", color=color, label=f"{name} own (anon)")
    ax.set_xlabel("minutes into the soak", fontsize=8)
    ax.set_ylabel("MiB, NameServer + broker", fontsize=8)
    ax.set_yscale("log")
    plain = importlib.import_module("matplotlib.ticker").FormatStrFormatter("%g")  # 600, not 6x10^2
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain)
    ax.tick_params(labelsize=7)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=_DPI)
    plt.close(fig)
    return path
