"""`mqbroker --enable-proxy` turns the gRPC endpoint on, as `enableProxy=true` in broker.conf does."""

from __future__ import annotations

import subprocess
from pathlib import Path

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
