"""Broker CPU per send without sockets: `python -m bench.sendpath [--num N] [--rounds R] [--flush F] [--set K=V]`.

`--batch 32 --per-read 8` sends SEND_BATCH_MESSAGE frames of 32 messages instead (each 1 KiB with its own
UNIQ_KEY, KEYS/TAGS/WAIT, and WAIT=true in the batch header, as the Java client's batch send), 8 a read: the
batch path of bench.vs_rocketmq's W3 without the client or the kernel.

`--auth` measures what ACL 2.0 costs the send path (broker/auth): two brokers in this process, one with
authentication and authorization off (unsigned frames), one with both on (a NORMAL user whose ACL allows the
topic; every frame signed by broker.protocol.signature, as a Java client's AclClientRPCHook signs it), take
rounds in turn. The figure is the ratio of their fastest quarters of rounds (`fastest_quarter`), with the
median of the pairs' ratios beside it. With `--batch 32` the batch frames are signed likewise (one signature
over a batch's header and body). Each pair also times the floor of any stateless check, as a share of the
path with authentication off: `verify_with` alone over the same signed frames, decoded beforehand (the signed
text and the HMAC-SHA1 over it and the body, which RocketMQ's signature requires of every request). `python -m
bench.instructions --auth` counts the same path's instructions, which this host's noise leaves alone.

An in-process BrokerController (real store in a temp dir, no NameServer) gets SEND_MESSAGE_V2 frames, as
bench/broker.py encodes them (binary header, 1 KiB body, KEYS/TAGS/WAIT and a fresh UNIQ_KEY per
message), fed 64 at a time (--per-read) into a server connection whose transport only counts the reply bytes. Each
round runs until every reply came back (SYNC_FLUSH: after the group commits) and reports the process CPU
time per message: the whole send path (decode, checks, CommitLog append, dispatch to ConsumeQueue and
IndexFile, reply encoding) with neither the kernel's TCP work nor a client sharing the two cores. The
best round is the least disturbed by the host (whose speed varies from minute to minute), which makes
it the number to compare code changes with.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.broker import _PROPS, _UNIQ_PLACEHOLDER, QUEUES, TOPIC, _send_template, _uniq_slots
from broker.auth.model import Acl, Action, Policy, PolicyEntry, PolicyType, Resource, User
from broker.protocol.batch import BatchMessage, encode_batch
from broker.protocol.command import FrameDecoder, RemotingCommand, decode_frame, encode_binary
from broker.protocol.properties import encode_properties
from broker.protocol.signature import Credentials, hmac_pads, sign_command, verify_with
from broker.server.broker import BrokerController
from broker.server.config import load_broker_config
from broker.transport.loop import run

__all__ = ["main"]

_OPAQUE_AT = 13
# between paired rounds: longer than the CommitLog's flush interval (flushIntervalCommitLog, 500 ms), so that
# one broker's writing behind is not counted in the other's round (the CPU measured is the process's)
_SETTLE = 0.7


class CountingTransport(asyncio.Transport):
    """What a server connection needs of a transport; replies are counted, not sent."""

    def __init__(self) -> None:
        super().__init__()
        self.written = 0
        self.replies = 0

    def write(self, data: Any) -> None:
        self.written += len(data)

    def writelines(self, list_of_data: Any) -> None:
        # counted as they are: asyncio's default joins them, a copy uvloop's writev does not make
        for data in list_of_data:
            self.written += len(data)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 10911)}.get(name, default)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass


def _frames(count: int, start: int) -> bytes:
    """`count` request frames with opaques start.. and distinct UNIQ_KEYs, back to back."""
    body = bytes(1024)
    props = encode_properties(_PROPS)
    out = bytearray()
    for i in range(start, start + count):
        t = _send_template(i % QUEUES, body, props=props)
        t[_OPAQUE_AT : _OPAQUE_AT + 4] = i.to_bytes(4, "big")
        for at in _uniq_slots(t):
            t[at : at + 12] = b"%012X" % i
        out += t
    return bytes(out)


def _batch_frames(count: int, start: int, size: int) -> bytes:
    """`count` SEND_BATCH_MESSAGE frames of `size` messages each, opaques start.., every UNIQ_KEY distinct."""
    body = bytes(1024)
    prefix = _UNIQ_PLACEHOLDER.decode()[:-12]
    header_props = encode_properties({"WAIT": "true"})
    out = bytearray()
    for i in range(start, start + count):
        inner = [
            BatchMessage(body, encode_properties({**_PROPS, "UNIQ_KEY": f"{prefix}{i * size + j:012X}"}))
            for j in range(size)
        ]
        t = _send_template(i % QUEUES, encode_batch(inner), code=320, props=header_props)
        t[_OPAQUE_AT : _OPAQUE_AT + 4] = i.to_bytes(4, "big")
        out += t
    return bytes(out)


BENCH_USER = Credentials("bench-user", "bench-secret")
_AUTH_KEYS = {
    "authenticationEnabled": "true",
    "authorizationEnabled": "true",
    "initAuthenticationUser": '{"username":"bench-root","password":"bench-root-secret"}',
}


def _signed_batch_frames(count: int, start: int, size: int, creds: Credentials) -> bytes:
    """As `_batch_frames`, each frame signed with `creds` (the signature covers the header and the whole batch)."""
    out = bytearray()
    for i in range(start, start + count):
        cmd = decode_frame(_batch_frames(1, i, size)[4:])
        sign_command(cmd, creds)
        out += encode_binary(cmd)
    return bytes(out)


def _signed_frames(count: int, start: int, creds: Credentials) -> bytes:
    """As `_frames`, each frame built whole and signed (the signature covers the UNIQ_KEY and the opaque-free
    header), the way a signing client sends them."""
    body = bytes(1024)
    prefix = _UNIQ_PLACEHOLDER.decode()[:-12]
    out = bytearray()
    for i in range(start, start + count):
        props = encode_properties({**_PROPS, "UNIQ_KEY": f"{prefix}{i:012X}"})
        ext = {"a": "BenchPG", "b": TOPIC, "c": "TBW102", "d": str(QUEUES), "e": str(i % QUEUES), "f": "0",
               "g": str(int(time.time() * 1000)), "h": "0", "i": props, "j": "0", "k": "false"}  # fmt: skip
        cmd = RemotingCommand(code=310, opaque=i, ext_fields=ext, body=body)
        sign_command(cmd, creds)
        out += encode_binary(cmd)
    return bytes(out)


def signed_requests(data: bytes) -> list[tuple[dict[str, str], bytes]]:
    """Each frame's extFields and body, from one read of length-prefixed frames."""
    return [(cmd.ext_fields, cmd.body or b"") for cmd in FrameDecoder().feed(data)]


def verify_floor(path: SendPath, secret: str) -> float:
    """The process's CPU µs per message of verifying signatures and nothing else: the first read's frames,
    decoded beforehand and verified over and over, as many frames as a round has. The frames stay in the CPU's
    caches, so this is the least a stateless check can cost."""
    requests = signed_requests(path.reads[0])
    pads = hmac_pads(secret)
    cpu = time.process_time()
    valid = 0
    for _ in range(len(path.reads)):
        valid += sum(verify_with(pads, fields, body) for fields, body in requests)
    spent = time.process_time() - cpu
    if valid != len(requests) * len(path.reads):
        raise RuntimeError("a signed frame fails its signature")
    return spent / path.messages * 1e6


def _allow_bench_user(broker: BrokerController) -> None:
    store = broker.auth.store
    store.ensure_user(User(BENCH_USER.access_key, BENCH_USER.secret_key))
    entry = PolicyEntry(Resource.parse(f"Topic:{TOPIC}"), (Action.PUB,))
    store.put_acl(Acl(BENCH_USER.access_key, [Policy(PolicyType.CUSTOM, [entry])]))


@dataclass
class SendPath:
    """One in-process broker with a server connection and the reads of one round, ready to measure."""

    broker: BrokerController
    root: Path
    conn: Any
    transport: CountingTransport
    reads: list[bytes]
    frames: int  # a round's requests
    messages: int  # a round's messages (a batch frame carries several)

    async def round(self) -> float:
        """The process's CPU µs per message of one round: every read, then until every reply came back
        (SYNC_FLUSH: after the group commits)."""
        before = self.transport.written
        cpu = time.process_time()
        for data in self.reads:
            self.conn.data_received(data)
            await asyncio.sleep(0)  # one loop iteration: the reput pass, group commit callbacks
        while self.transport.written - before < self.frames * 150:  # every reply (~200 B each)
            await asyncio.sleep(0.001)
        return (time.process_time() - cpu) / self.messages * 1e6

    async def close(self) -> None:
        await self.broker.shutdown()
        shutil.rmtree(self.root, ignore_errors=True)


async def _open(args: argparse.Namespace, auth: bool) -> SendPath:
    root = Path(tempfile.mkdtemp(prefix="bench-sendpath-"))
    broker = BrokerController(
        load_broker_config(
            {
                "brokerName": "sendpath-auth" if auth else "sendpath",
                "listenPort": "0",
                "haListenPort": "0",
                "brokerIP1": "127.0.0.1",
                "storePathRootDir": str(root / "store"),
                "flushDiskType": args.flush,
                "mappedFileSizeCommitLog": str(1 << 30),
                **dict(item.split("=", 1) for item in args.set),
                **(_AUTH_KEYS if auth else {}),
            }
        )
    )
    await broker.start()
    if auth:
        _allow_bench_user(broker)
    assert broker.server is not None
    conn = broker.server._create_protocol()
    transport = CountingTransport()
    conn.connection_made(transport)
    per_read = args.per_read
    make = (lambda n, s: _signed_frames(n, s, BENCH_USER)) if auth else _frames
    if args.batch > 1:
        make = functools.partial(_batch_frames, size=args.batch)
        if auth:
            make = functools.partial(_signed_batch_frames, size=args.batch, creds=BENCH_USER)
    reads = [make(per_read, 1 + r * per_read) for r in range(args.num // (per_read * args.batch))]
    conn.data_received(reads[0])  # creates the topic (auto-creation from TBW102)
    await asyncio.sleep(0.5)
    frames = len(reads) * per_read
    return SendPath(broker, root, conn, transport, reads, frames, frames * args.batch)


def fastest_quarter(rounds: list[float]) -> float:
    """The mean of the fastest quarter of the rounds: the host only ever adds time (another tenant, a page
    written back), so the fastest rounds are the code's cost, and a quarter of them averages away one lucky one."""
    fastest = sorted(rounds)[: max(1, len(rounds) // 4)]
    return sum(fastest) / len(fastest)


async def _rounds(args: argparse.Namespace) -> list[float]:
    path = await _open(args, auth=False)
    try:
        return [await path.round() for _ in range(args.rounds)]
    finally:
        await path.close()


async def _paired_auth(args: argparse.Namespace) -> tuple[list[float], list[float], list[float]]:
    """Rounds of a broker with authentication off and of one with it on, in turn (the first of a pair
    alternates), so that each pair sees the same minute of the host; then, in the same pair, the signature
    verification alone over the signed side's frames."""
    off = await _open(args, auth=False)
    on = await _open(args, auth=True)
    try:
        offs: list[float] = []
        ons: list[float] = []
        floors: list[float] = []
        for n in range(args.rounds):
            for path in (off, on) if n % 2 == 0 else (on, off):
                (offs if path is off else ons).append(await path.round())
                await asyncio.sleep(_SETTLE)  # its flush and dispatch done before the other's round
            floors.append(verify_floor(on, BENCH_USER.secret_key))
        return offs, ons, floors
    finally:
        await on.close()
        await off.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num", type=int, default=64_000, help="messages a round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--flush", default="ASYNC_FLUSH", choices=["ASYNC_FLUSH", "SYNC_FLUSH"])
    parser.add_argument("--per-read", type=int, default=64, help="request frames handed over per read")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker.conf key for the broker under test (repeatable), e.g. messageIndexEnable=false",
    )
    parser.add_argument(
        "--auth", action="store_true", help="a broker with ACL 2.0 off and one with it on, rounds in turn; prints both"
    )
    parser.add_argument("--batch", type=int, default=1, help="messages a frame (>1: SEND_BATCH_MESSAGE)")
    args = parser.parse_args(argv)
    if args.auth:
        offs, ons, floors = run(_paired_auth(args))
        ratios = [on / off for off, on in zip(offs, ons, strict=True)]
        floor_shares = [floor / off for off, floor in zip(offs, floors, strict=True)]
        print(
            f"{args.flush} send path, {args.rounds} pairs of rounds of {args.num} msgs, {args.batch} a frame, "
            f"CPU us/msg: auth off median {statistics.median(offs):.1f} (fastest quarter {fastest_quarter(offs):.1f}), "
            f"auth on median {statistics.median(ons):.1f} (fastest quarter {fastest_quarter(ons):.1f}); on / off: "
            f"fastest quarters {fastest_quarter(ons) / fastest_quarter(offs):.3f}, "
            f"median of the pairs {statistics.median(ratios):.3f}"
        )
        print(
            f"signature verification alone over the same frames: fastest quarter {fastest_quarter(floors):.2f} "
            f"us/msg, {fastest_quarter(floors) / fastest_quarter(offs):.3f} of auth off's fastest quarter, "
            f"median of the pairs {statistics.median(floor_shares):.3f}"
        )
        return
    results = run(_rounds(args))
    print(
        f"{args.flush} send path, {args.num} msgs x {args.rounds} rounds, "
        f"{args.per_read} frames of {args.batch} a read: "
        f"best {min(results):.1f} us/msg, median {statistics.median(results):.1f} "
        "(CPU of the broker process, all threads)"
    )


if __name__ == "__main__":
    main()
