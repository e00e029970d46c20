"""Real controller processes on loopback for the controller tests: start, find the leader, kill -9."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

MQCONTROLLER = str(Path(sys.executable).with_name("mqcontroller"))


# Every port free_ports handed out in this process, and the one after it: a later call (the brokers' ports after
# the controllers') must not return one of them, since nothing holds a port between its choice and its use.
_HANDED_OUT: set[int] = set()


def free_ports(count: int) -> list[int]:
    """Ports p with p+1 also free (the Raft port is the peer port + 1), none of them handed out before here."""
    ports: list[int] = []
    while len(ports) < count:
        with socket.socket() as a:
            a.bind(("127.0.0.1", 0))
            port = a.getsockname()[1]
            if port >= 65535 or {port, port + 1} & _HANDED_OUT:
                continue
            with socket.socket() as b:
                try:
                    b.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
        ports.append(port)
        _HANDED_OUT.update((port, port + 1))
    return ports


@dataclass
class Controllers:
    """`count` mqcontroller processes of one group under `root`."""

    root: Path
    count: int = 3
    extra: str = ""
    ports: list[int] = field(default_factory=list)
    procs: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.ports = free_ports(self.count)

    @property
    def peers(self) -> str:
        return ";".join(f"n{i}-127.0.0.1:{p}" for i, p in enumerate(self.ports))

    @property
    def addresses(self) -> list[str]:
        return [f"127.0.0.1:{p}" for p in self.ports]

    def conf(self, index: int) -> Path:
        path = self.root / f"controller-n{index}.conf"
        path.write_text(
            "controllerDLegerGroup=group1\n"
            f"controllerDLegerPeers={self.peers}\n"
            f"controllerDLegerSelfId=n{index}\n"
            f"controllerStorePath={self.root / f'store-n{index}'}\n"
            "bindAddress=127.0.0.1\n"
            "scanNotActiveBrokerInterval=500\n"
            "scanInactiveMasterInterval=1000\n" + self.extra
        )
        return path

    def start(self, index: int) -> None:
        log = open(self.root / f"controller-n{index}.log", "ab")  # noqa: SIM115 - the process owns it
        env = {**os.environ, "HOME": str(self.root)}
        self.procs[index] = subprocess.Popen(
            [MQCONTROLLER, "-c", str(self.conf(index))], stdout=log, stderr=subprocess.STDOUT, env=env
        )
        log.close()

    def start_all(self) -> None:
        for i in range(self.count):
            self.start(i)

    def kill9(self, index: int) -> None:
        proc = self.procs.pop(index)
        proc.kill()
        proc.wait(10)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            proc.kill()
        for proc in self.procs.values():
            proc.wait(10)
        self.procs.clear()

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-3000:] for p in sorted(self.root.glob("controller-n*.log")))
