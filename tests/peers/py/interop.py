"""Interop driver for the C++-core Python clients (PyPI rocketmq 0.4.4 and rocketmq-python-cvs 2.1.0.3).

Run by tests/interop with the peer's own venv python (both packages install a module named
`rocketmq`, so never ours), against a real NameServer + broker. Two subcommands, each printing one
JSON line per event on stdout so the test can check every field:

  produce --send MODE:TOPIC[:COUNT] MODE is sync, delay (sync with delay level 2), oneway, orderly
                                    (send_orderly with a selector on `shard`) or batch (send_batch);
                                    messages carry the canonical test fields (see `fields`); results
                                    are printed as {"event": "sent"} or {"event": "send_error"}.
  consume --topic T [...] --expect N [--orderly] [--fail-once] [--expression "tagA || tagB"]
                                    a PushConsumer prints {"event": "msg", ...} per delivery and
                                    leaves once N deliveries succeeded (rc 0) or at --timeout (rc 3).
                                    --fail-once raises on a message's first delivery, so the client
                                    answers RECONSUME_LATER and the broker must redeliver it.

  pull --topic T [...] --expect N  the PullConsumer reads every queue from offset 0 to the end.

  transact --topic T --outcome commit|rollback|unknown [...] --checks N
                                    transactional sends through the C core's TransactionMQProducer
                                    (see `transact`): message i carries the canonical fields plus
                                    property `outcome`, its local transaction returns outcome i, and
                                    the checker answers every CHECK_TRANSACTION_STATE with COMMIT.
                                    Prints {"event": "local"} per local transaction, {"event": "sent"}
                                    per send and {"event": "check"} per check-back; leaves once N
                                    checks arrived (rc 0) or at --timeout (rc 3).

--ssl-properties FILE (produce, consume) turns TLS on through the C API's SetProducerSsl/SetPushConsumerSsl and
their property-file calls (tls.client.trustCertPath, tls.client.authServer, ...). Only a core built from
rocketmq-client-cpp's main branch has them (scripts/cpp-client-ssl.sh); the 2.1.0 core of the cvs wheel has not.

All leave with os._exit: the cvs build segfaults in PushConsumer.shutdown() (upstream
rocketmq-client-cpp issue 335), so consume calls it only with --shutdown. Bodies are printed
base64-encoded so the test compares exact bytes.
"""

import argparse
import base64
import ctypes
import json
import os
import sys
import threading
import time

from rocketmq.client import Message, Producer, PullConsumer, PushConsumer, RecvMessage
from rocketmq.ffi import _CSendResult, dll

# User properties the tests set and read back; C++ can only read properties by name.
PROP_NAMES = ("color", "city", "seq", "shard", "origin", "UNIQ_KEY", "RETRY_TOPIC", "ORIGIN_MESSAGE_ID")
_print_lock = threading.Lock()
#: Delay level of "delay" sends: the test broker maps every level to 1 s.
DELAY_LEVEL = 2


def emit(event, **data):
    with _print_lock:
        sys.stdout.write(json.dumps({"event": event, **data}, ensure_ascii=False) + "\n")
        sys.stdout.flush()


def fields(origin, topic, i, shards):
    """The canonical content of message i: a unicode body, a tag, a key and user properties.

    Must stay identical to `fields` in js/interop.js and tests/interop/interop_harness.py."""
    return {
        "topic": topic,
        "tags": f"tag{i % 2}",
        "keys": f"key-{origin}-{i}",
        # Every fifth message is ~12 KiB: above the 4 KiB where clients compress (sysFlag bit 0).
        "body": f"héllo wörld 世界 🚀 {origin} #{i}" * (400 if i % 5 == 4 else 1),
        "props": {"color": "blue", "city": "Zürich", "seq": str(i), "shard": str(i % shards), "origin": origin},
    }


def build(spec):
    msg = Message(spec["topic"])
    msg.set_tags(spec["tags"])
    msg.set_keys(spec["keys"])
    msg.set_body(spec["body"])
    for name, value in spec["props"].items():
        msg.set_property(name, value)
    return msg


def send_all(producer, mode, topic, specs, shards):
    """Send `specs` with one API of the client, printing a "sent" event per result."""
    if mode == "batch":
        result = producer.send_batch([build(s) for s in specs])
        emit("sent", mode=mode, topic=topic, n=len(specs), status=int(result.status), msg_id=result.msg_id)
        return
    for i, spec in enumerate(specs):
        msg = build(spec)
        if mode == "oneway":
            producer.send_oneway(msg)
            emit("sent", mode=mode, topic=topic, seq=i)
            continue
        if mode == "orderly":
            # The library's default selector: arg % number of queues, so one shard -> one queue.
            result = producer.send_orderly(msg, i % shards)
        elif mode in ("sync", "delay"):
            if mode == "delay":
                msg.set_delay_time_level(DELAY_LEVEL)
            result = producer.send_sync(msg)
        else:
            raise SystemExit(f"unknown mode {mode}")
        status, msg_id = int(result.status), result.msg_id
        emit("sent", mode=mode, topic=topic, seq=i, status=status, msg_id=msg_id, offset=result.offset)


def enable_ssl(handle, kind, properties):
    """TLS for a producer or push consumer (`kind`: "Producer" or "PushConsumer") before its start."""
    calls = (f"Set{kind}Ssl", f"Set{kind}SslPropertyFile")
    if not all(hasattr(dll, call) for call in calls):
        raise SystemExit(f"this librocketmq has no {' or '.join(calls)}: its core was built without TLS")
    switch, file_call = (getattr(dll, call) for call in calls)
    switch.argtypes, file_call.argtypes = [ctypes.c_void_p, ctypes.c_int], [ctypes.c_void_p, ctypes.c_char_p]
    if switch(handle, 1) != 0 or file_call(handle, properties.encode()) != 0:
        raise SystemExit(f"{calls[0]} failed")


def produce(args):
    producer = Producer(args.group)
    producer.set_namesrv_addr(args.namesrv)
    if args.ssl_properties:
        enable_ssl(producer._handle, "Producer", args.ssl_properties)
    if args.access_key:  # ACL: the C core signs every request (ClientRPCHook)
        producer.set_session_credentials(args.access_key, args.secret_key, "ALIYUN")
    producer.start()
    for send in args.send:
        # MODE:TOPIC[:COUNT]; a failed send is reported and the next MODE:TOPIC still runs.
        mode, topic, *count = send.split(":")
        specs = [fields(args.origin, topic, i, args.shards) for i in range(int(count[0]) if count else args.count)]
        try:
            send_all(producer, mode, topic, specs, args.shards)
        except Exception as exc:
            emit("send_error", mode=mode, topic=topic, error=f"{type(exc).__name__}: {exc}")
    # One-way sends are fire-and-forget: give the socket a moment before the process goes away.
    time.sleep(args.linger)
    producer.shutdown()
    os._exit(0)


def _text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def record_of(msg):
    """A received message as the JSON the tests compare (same keys for every client)."""
    return {
        "topic": _text(msg.topic),
        "tags": _text(msg.tags),
        "keys": _text(msg.keys),
        "body_b64": base64.b64encode(msg.body or b"").decode(),
        "id": _text(msg.id),
        "queue_id": msg.queue_id,
        "queue_offset": msg.queue_offset,
        "reconsume_times": msg.reconsume_times,
        "born_ts": msg.born_timestamp,
        "store_ts": msg.store_timestamp,
        "props": {n: _text(msg.get_property(n)) for n in PROP_NAMES if msg.get_property(n)},
    }


def pull(args):
    """PullConsumer.pull from each queue's offset 0 until NO_NEW_MSG (no long polling)."""
    consumer = PullConsumer(args.group)
    consumer.set_namesrv_addr(args.namesrv)
    consumer.start()
    count = 0
    for topic in args.topic:
        for msg in consumer.pull(topic, args.expression):
            emit("msg", **record_of(msg))
            count += 1
    emit("done", ok=count, reached=count >= args.expect)
    consumer.shutdown()
    os._exit(0 if count >= args.expect else 3)


def consume(args):
    done = threading.Event()
    state = {"ok": 0}

    def on_message(msg):
        record = record_of(msg)
        first = msg.reconsume_times == 0
        if args.fail_once and first:
            emit("fail", **record)
            raise RuntimeError("failing the first delivery on purpose")
        emit("msg", **record)
        with _print_lock:
            state["ok"] += 1
            if state["ok"] >= args.expect:
                done.set()

    consumer = PushConsumer(args.group, orderly=args.orderly)
    consumer.set_namesrv_addr(args.namesrv)
    if args.ssl_properties:
        enable_ssl(consumer._handle, "PushConsumer", args.ssl_properties)
    if args.access_key:
        consumer.set_session_credentials(args.access_key, args.secret_key, "ALIYUN")
    for topic in args.topic:
        consumer.subscribe(topic, on_message, args.expression)
    consumer.start()
    emit("started")
    reached = done.wait(args.timeout)
    # Offsets reach the broker from a 5 s persist timer (or on shutdown): --linger lets the timer
    # fire, --shutdown commits and unregisters (only where shutdown does not segfault: 0.4.4).
    time.sleep(args.linger)
    if args.shutdown:
        consumer.shutdown()
    emit("done", ok=state["ok"], reached=reached)
    os._exit(0 if reached else 3)


#: The C API's CTransactionStatus (rocketmq-client-cpp 2.x include/CTransactionStatus.h).
TX_STATUS = {"commit": 0, "rollback": 1, "unknown": 2}


def transact(args):
    """Transactional sends with the C core's API, which neither Python package wraps.

    rocketmq-client-cpp 2.1.0 (the cvs build) exports CreateTransactionProducer and
    SendMessageTransaction (its CTransactionProducer.h); Apache rocketmq-client-python 2.0.0 wraps
    exactly these as TransactionMQProducer, with the same ctypes signatures used here. The 1.x core
    of PyPI rocketmq 0.4.4 has no such symbols, so this reports "unsupported" there.
    """
    if not hasattr(dll, "CreateTransactionProducer"):
        emit("unsupported", error="librocketmq.so exports no CreateTransactionProducer")
        os._exit(4)
    check_cb = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
    exec_cb = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
    dll.CreateTransactionProducer.argtypes = [ctypes.c_char_p, check_cb, ctypes.c_void_p]
    dll.CreateTransactionProducer.restype = ctypes.c_void_p
    dll.SendMessageTransaction.argtypes = [
        ctypes.c_void_p,
        ctypes.c_void_p,
        exec_cb,
        ctypes.c_void_p,
        ctypes.POINTER(_CSendResult),
    ]
    dll.SendMessageTransaction.restype = ctypes.c_int
    dll.GetOriginMessageProperty.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    dll.GetOriginMessageProperty.restype = ctypes.c_char_p

    done = threading.Event()
    checks = []

    def on_check(_producer, c_msg_ext, _user):
        # CHECK_TRANSACTION_STATE from the broker: the message is the half message it holds.
        record = record_of(RecvMessage(c_msg_ext))
        record["outcome"] = _text(dll.GetMessageProperty(c_msg_ext, b"outcome"))
        record["check_times"] = _text(dll.GetMessageProperty(c_msg_ext, b"TRANSACTION_CHECK_TIMES"))
        emit("check", **record)
        with _print_lock:
            checks.append(record)
            if len(checks) >= args.checks:
                done.set()
        return TX_STATUS["commit"]

    def on_local(_producer, c_msg, _user):
        outcome = _text(dll.GetOriginMessageProperty(c_msg, b"outcome"))
        seq = _text(dll.GetOriginMessageProperty(c_msg, b"seq"))
        emit("local", seq=int(seq), outcome=outcome)
        return TX_STATUS[outcome]

    checker = check_cb(on_check)  # kept referenced: the core calls it from its own threads
    local = exec_cb(on_local)
    handle = dll.CreateTransactionProducer(args.group.encode(), checker, None)
    if not handle:
        raise RuntimeError("CreateTransactionProducer returned NULL")
    dll.SetProducerNameServerAddress(handle, args.namesrv.encode())
    if dll.StartProducer(handle) != 0:
        raise RuntimeError(f"StartProducer failed: {_text(dll.GetLatestErrorMessage())}")
    topic = args.topic[0]
    for i, outcome in enumerate(args.outcome):
        spec = fields(args.origin, topic, i, args.shards)
        spec["props"]["outcome"] = outcome
        msg = build(spec)
        result = _CSendResult()
        # Sends the half message, runs on_local, then END_TRANSACTION (one-way) with its answer.
        rc = dll.SendMessageTransaction(handle, msg, local, None, ctypes.pointer(result))
        emit("sent", seq=i, outcome=outcome, rc=rc, status=result.sendStatus, msg_id=_text(result.msgId))
    reached = done.wait(args.timeout) if args.checks else True
    # The checker's COMMIT goes back as a one-way END_TRANSACTION: let it leave before exiting.
    time.sleep(args.linger)
    emit("done", checks=len(checks), reached=reached)
    os._exit(0 if reached else 3)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=("produce", "consume", "pull", "transact"))
    parser.add_argument("--namesrv", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--origin", default="cpp")
    parser.add_argument("--access-key", default="", help="ACL credentials (produce, consume)")
    parser.add_argument("--secret-key", default="")
    parser.add_argument("--ssl-properties", default="", help="TLS property file (produce, consume)")
    parser.add_argument("--send", action="append", default=[], help="MODE:TOPIC (produce)")
    parser.add_argument("--count", type=int, default=4)
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--topic", action="append", default=[], help="topic to subscribe (consume)")
    parser.add_argument("--expect", type=int, default=1)
    parser.add_argument("--expression", default="*", help="subscription expression for every topic")
    parser.add_argument("--orderly", action="store_true")
    parser.add_argument("--fail-once", action="store_true")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--linger", type=float, default=0.5)
    parser.add_argument("--outcome", action="append", default=[], choices=sorted(TX_STATUS), help="transact")
    parser.add_argument("--checks", type=int, default=0, help="transact: check-backs to wait for")
    parser.add_argument("--shutdown", action="store_true", help="consume: call PushConsumer.shutdown() at the end")
    args = parser.parse_args()
    try:
        {"produce": produce, "consume": consume, "pull": pull, "transact": transact}[args.command](args)
    except Exception as exc:  # report any client failure as one line, then leave fast
        emit("error", error=f"{type(exc).__name__}: {exc}")
        os._exit(2)


if __name__ == "__main__":
    main()
