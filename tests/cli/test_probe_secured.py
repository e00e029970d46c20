"""`rocketcluster-probe` against a broker with authentication and TLS enforced (as the operator runs it with
spec.security on): the real console script, a real broker on loopback, a credentials directory as the kubelet
mounts a Secret."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_probe_processes import probe
from tests.local_cluster import local_cluster

SECURED = {
    "authenticationEnabled": "true",
    "authorizationEnabled": "true",
    "innerClientAuthenticationCredentials": json.dumps(
        {"accessKey": "rocketcluster-operator", "secretKey": "s3cr3t-Key"}
    ),
    "tls.server.mode": "enforcing",
    "tls.test.mode.enable": "true",
    "tls.enable": "true",
}


def _credentials(root: Path, access_key: str, secret_key: str) -> str:
    root.mkdir()
    (root / "accessKey").write_text(access_key)
    (root / "secretKey").write_text(secret_key + "\n")  # a trailing newline, as editors leave it
    return str(root)


async def test_the_probe_signs_and_speaks_tls_when_told(tmp_path: Path) -> None:
    good = _credentials(tmp_path / "good", "rocketcluster-operator", "s3cr3t-Key")
    wrong = _credentials(tmp_path / "wrong", "rocketcluster-operator", "not-the-key")
    async with local_cluster(tmp_path / "cluster", **SECURED) as cluster:
        addr = cluster.running_broker.addr
        code, out = await probe("broker", "--addr", addr, "--tls", "--credentials-dir", good)
        assert code == 0 and out.startswith("ready: ASYNC_MASTER registered with"), out

        # plaintext against tls.server.mode=enforcing: refused with the broker's reason
        code, out = await probe("broker", "--addr", addr, "--credentials-dir", good)
        assert code == 1 and "TLS" in out, out
        # no signature, then a wrong one: NO_PERMISSION (16), and the secret is never printed
        code, out = await probe("broker", "--addr", addr, "--tls")
        assert code == 1 and "code 16" in out, out
        code, out = await probe("broker", "--addr", addr, "--tls", "--credentials-dir", wrong)
        assert code == 1 and "code 16" in out and "not-the-key" not in out, out
        assert out.count("\n") == 1


async def test_a_missing_or_empty_credentials_directory_is_one_clear_line(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "accessKey").write_text("")
    (empty / "secretKey").write_text("x")
    code, out = await probe("broker", "--addr", "127.0.0.1:1", "--credentials-dir", str(tmp_path / "absent"))
    assert code == 1 and out.startswith("not ready: credentials in") and "No such file" in out
    code, out = await probe("namesrv", "--addr", "127.0.0.1:1", "--credentials-dir", str(empty))
    assert (code, out) == (1, f"not ready: credentials in {empty}: accessKey or secretKey is empty\n")


async def test_hostile_credential_files_are_one_line_without_their_content(tmp_path: Path) -> None:
    cases = {
        "oversized": (b"k" * 5000, "accessKey is larger than 4096 bytes"),
        "binary": (b"\xff\xfe\x00key", "accessKey is not UTF-8 text"),
        "blank": (b" \n\t\n", "accessKey or secretKey is empty"),
    }
    for name, (content, words) in cases.items():
        directory = tmp_path / name
        directory.mkdir()
        (directory / "accessKey").write_bytes(content)
        (directory / "secretKey").write_text("s3cr3t-value")
        code, out = await probe("broker", "--addr", "127.0.0.1:1", "--credentials-dir", str(directory))
        assert code == 1 and out == f"not ready: credentials in {directory}: {words}\n", out
        assert "s3cr3t-value" not in out
    truncated = tmp_path / "truncated"
    truncated.mkdir()
    (truncated / "accessKey").write_text("rocketcluster-operator")
    (truncated / "secretKey").symlink_to(truncated / "missing")  # a Secret volume's dangling link
    code, out = await probe("namesrv", "--addr", "127.0.0.1:1", "--credentials-dir", str(truncated))
    assert code == 1 and out.startswith(f"not ready: credentials in {truncated}: No such file"), out
