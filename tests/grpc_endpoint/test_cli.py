"""`mqbroker --enable-proxy` turns the gRPC endpoint on, as `enableProxy=true` in broker.conf does."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.peers import REPO


def _effective(*args: str) -> dict[str, str]:
    out = subprocess.run(
        [str(REPO / ".venv" / "bin" / "mqbroker"), *args, "-p"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def test_enable_proxy_flag(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("grpcServerPort=18081\n", encoding="utf-8")
    assert _effective("-c", str(conf))["enableProxy"] == "false"
    flagged = _effective("-c", str(conf), "--enable-proxy")
    assert flagged["enableProxy"] == "true" and flagged["grpcServerPort"] == "18081"


@pytest.mark.parametrize(
    "domain",
    ["bad..pod", "-orders.pod", "orders.pod.", "x" * 64 + ".pod", "orders pod", "ns.pod\u0000", "a." * 101 + "pod"],
)
def test_a_route_domain_that_is_no_dns_name_is_refused_by_name(tmp_path: Path, domain: str) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(f"grpcRouteDomain={domain}\n", encoding="utf-8")
    done = subprocess.run(
        [str(REPO / ".venv" / "bin" / "mqbroker"), "-c", str(conf), "-p"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    assert "grpcRouteDomain" in done.stderr and "is no DNS domain" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_a_route_domain_is_taken(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("grpcRouteDomain=orders.pod.cluster.local\n", encoding="utf-8")
    assert _effective("-c", str(conf))["grpcRouteDomain"] == "orders.pod.cluster.local"
