"""The README's commands run as written, in order, against a fresh `make run`.

The "Try it" block runs against scripts/run-local.sh (what `make run` runs) with a temporary data dir and
free ports: the one substitution is the NameServer address, 127.0.0.1:9876 in the README, the test's here.
The "Running a broker like RocketMQ" block runs literally, from a directory holding the repository's conf/
and .venv, when its ports (9876, 10911, 10912) are free.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.newuser.processes import free_port
from tests.newuser.user_harness import user_env

REPO = Path(__file__).resolve().parents[2]
README_ADDR = "127.0.0.1:9876"


def _block(heading: str) -> list[str]:
    """The commands of the first ```sh block after `heading`, one per line, comments kept (bash drops them)."""
    text = (REPO / "README.md").read_text()
    section = text[text.index(heading) :]
    match = re.search(r"```sh\n(.*?)```", section, re.S)
    assert match is not None, f"no sh block after {heading!r}"
    return [line for line in match.group(1).splitlines() if line.strip()]


def _port_free(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def test_try_it_runs_in_order_against_a_fresh_make_run(tmp_path: Path) -> None:
    commands = _block("## Try it")
    assert commands[0] == f"export NAMESRV_ADDR={README_ADDR}"
    namesrv_port = free_port()
    addr = f"127.0.0.1:{namesrv_port}"
    env = user_env(
        RUN_DATA_DIR=str(tmp_path / "data"),
        RUN_NAMESRV_PORT=str(namesrv_port),
        RUN_BROKER_PORT=str(free_port()),
        RUN_HA_PORT="0",
    )
    run = subprocess.Popen(
        ["bash", "scripts/run-local.sh"], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        assert run.stdout is not None
        for line in run.stdout:
            if line.startswith("RocketCluster is running"):
                break
        else:
            raise AssertionError(f"make run exited {run.wait()} before running")
        outputs: dict[str, str] = {}
        script_env = user_env()
        for command in commands:
            line = command.replace(README_ADDR, addr)
            if line.startswith("export NAMESRV_ADDR="):
                script_env["NAMESRV_ADDR"] = line.split("=", 1)[1]
                continue
            done = subprocess.run(
                ["bash", "-c", line], cwd=REPO, env=script_env, capture_output=True, text=True, timeout=180
            )
            assert done.returncode == 0, f"{command}\nexit {done.returncode}\n{done.stdout}\n{done.stderr}"
            outputs[command.split("#")[0].strip()] = done.stdout
        said = "\n".join(outputs.values())
        assert "SEND_OK" in said
        assert "hello rocketcluster" in said  # consumeMessage printed the message sent before it
        assert said.count("received ") == 10  # the quickstart got its ten messages back
        assert "Diff Total: 0" in said  # consumerProgress of the quickstart's group: all consumed
    finally:
        run.send_signal(signal.SIGINT)
        assert run.wait(120) == 0


def _wait_for(proc: subprocess.Popen[bytes], log: Path, text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_text(errors="replace"):
        if proc.poll() is not None:
            raise AssertionError(f"exited {proc.returncode} before printing {text!r}:\n{log.read_text()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {text!r} in {timeout} s:\n{log.read_text()}")
        time.sleep(0.05)


def test_running_a_broker_like_rocketmq_runs_as_written(tmp_path: Path) -> None:
    if not all(_port_free(p) for p in (9876, 10911, 10912)):
        pytest.skip("the README's ports 9876/10911/10912 are in use here (a `make run`?)")
    commands = _block("## Running a broker like RocketMQ")
    assert len(commands) == 2
    # the repository as the reader has it, minus its data: conf/ copied, the venv linked
    shutil.copytree(REPO / "conf", tmp_path / "conf")
    (tmp_path / ".venv").symlink_to(REPO / ".venv")
    started: list[subprocess.Popen[bytes]] = []
    try:
        for n, command in enumerate(commands):
            log = tmp_path / f"server-{n}.log"
            with log.open("wb") as out:
                proc = subprocess.Popen(
                    ["bash", "-c", f"exec {command}"], cwd=tmp_path, env=user_env(), stdout=out, stderr=out
                )
            started.append(proc)
            _wait_for(proc, log, "boot success", 120)
        listed = subprocess.run(
            [str(REPO / ".venv/bin/mqadmin"), "clusterList", "-n", README_ADDR],
            env=user_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert listed.returncode == 0 and "broker-a" in listed.stdout, listed.stderr
        assert (tmp_path / ".data" / "store" / "commitlog").is_dir()  # storePathRootDir, relative to here
    finally:
        for proc in reversed(started):
            proc.send_signal(signal.SIGTERM)
        codes = [proc.wait(60) for proc in reversed(started)]
    assert codes == [0, 0]
