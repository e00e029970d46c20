"""bench.broker --auth: its frames, re-signed after each UNIQ_KEY patch, verify as the broker verifies them (a
wrong signature would turn the authenticated side's sends into refusals), and the on / off table pairs phases."""

from __future__ import annotations

from bench.broker import BENCH_USER, PhaseResult, Template, _send_template, _uniq_digits, auth_cost
from broker.protocol.batch import BatchMessage, decode_batch, encode_batch
from broker.protocol.command import decode_frame
from broker.protocol.properties import decode_properties, encode_properties
from broker.protocol.signature import verify

PROPS = encode_properties({"KEYS": "k", "UNIQ_KEY": "7F0000010B6C18B4AAC2" + "0" * 12})


def _send(template: Template, opaque: int) -> bytes:
    """What BenchConnection.send_frame does to a template before it writes it, as it does it."""
    for n, at in enumerate(template.uniq_at):
        template.frame[at : at + 12] = _uniq_digits(opaque, n)
    assert template.signer is not None
    template.signer.sign(template.frame, opaque)
    return bytes(template.frame[4:])


def test_a_resigned_single_send_verifies_with_its_new_uniq_key() -> None:
    template = Template.of(_send_template(3, b"x" * 1024, props=PROPS, signed_as=BENCH_USER.access_key), True)
    for opaque in (1, 2, 77):  # the same template again and again, as a phase sends it
        cmd = decode_frame(_send(template, opaque))
        assert decode_properties(cmd.ext_fields["i"])["UNIQ_KEY"].endswith(_uniq_digits(opaque, 0).decode())
        assert verify(BENCH_USER.secret_key, cmd.ext_fields, cmd.body)
        assert not verify("another-secret", cmd.ext_fields, cmd.body)


def test_a_resigned_batch_verifies_with_each_messages_new_uniq_key() -> None:
    body = encode_batch([BatchMessage(b"y" * 100, PROPS)] * 4)
    template = Template.of(_send_template(0, body, code=320, signed_as=BENCH_USER.access_key), True)
    for opaque in (9, 10):
        cmd = decode_frame(_send(template, opaque))
        keys = [decode_properties(m.properties)["UNIQ_KEY"][-12:] for m in decode_batch(cmd.body)]
        assert keys == [_uniq_digits(opaque, n).decode() for n in range(4)]
        assert verify(BENCH_USER.secret_key, cmd.ext_fields, cmd.body)


def test_the_cost_table_pairs_each_phase_off_with_on() -> None:
    results = [
        PhaseResult("ASYNC_FLUSH pipelined x64, auth off", 1000, 1.0, 0, 0, 0, broker_cpu_s=0.010),
        PhaseResult("ASYNC_FLUSH pipelined x64, auth stateful", 1000, 1.25, 0, 0, 0, broker_cpu_s=0.011),
        PhaseResult("ASYNC_FLUSH consume (pull 32) x64, auth off", 500, 1.0, 0, 0, 0, broker_cpu_s=0.001),
    ]
    [(name, cpu, rate)] = auth_cost(results, "stateful")
    assert name == "ASYNC_FLUSH pipelined x64"
    assert round(cpu, 6) == 1.1 and round(rate, 6) == 0.8
