"""The remoting signature (broker/protocol/signature.py) against RocketMQ's vectors (security.md §1.6) and
extFields as fastjson stringifies non-string JSON values (§1.11)."""

from __future__ import annotations

import base64
import hashlib
import hmac

import orjson
import pytest

from broker.protocol.command import RemotingCommand, decode_frame, frame
from broker.protocol.signature import Credentials, sign, sign_command, signed_content, verify


def test_acl_signer_vector() -> None:
    # AclSignerTest: HMAC-SHA1("RocketMQ", key "12345678")
    digest = hmac.new(b"12345678", b"RocketMQ", hashlib.sha1).digest()
    assert base64.b64encode(digest).decode() == "IUc8rrO/0gDch8CjObLQsW2rsiA="
    assert sign("12345678", {"a": "RocketMQ"}) == "IUc8rrO/0gDch8CjObLQsW2rsiA="


@pytest.mark.parametrize(
    ("body", "expected"),
    [(b"", "8Ae4N1ZdEDGw6wPdRRYYUvgWNr4="), (b"hello", "ChCQ5I4lOO02E1EfGnPlnXyMWBk=")],
)
def test_synthetic_vectors(body: bytes, expected: str) -> None:
    ext = {"consumerGroup": "G1", "AccessKey": "rocketmq2"}
    assert signed_content(ext, body) == b"rocketmq2G1" + body
    assert sign("12345678", ext, body) == expected
    assert verify("12345678", {**ext, "Signature": expected}, body)


def test_signature_field_is_not_signed_and_keys_sort_upper_first() -> None:
    ext = {"b": "2", "A": "1", "a": "3", "Signature": "zzz"}
    assert signed_content(ext) == b"132"


def test_unique_key_query_skipped_for_old_versions() -> None:
    ext = {"AccessKey": "ak", "_UNIQUE_KEY_QUERY": "true", "topic": "T"}
    assert signed_content(ext, version=399) == b"akT"
    assert signed_content(ext, version=400) == b"aktrueT"
    assert signed_content(ext) == b"aktrueT"


def test_fastjson_stringified_values_verify() -> None:
    # A C++ SEND_MESSAGE_V2 header: JSON numbers among strings; the client signed their digits.
    raw = {"AccessKey": "rocketmq2", "OnsChannel": "ALIYUN", "a": "PID", "b": "T", "d": 4, "e": 0, "l": 16, "m": True}
    as_text = {k: (("true" if v else "false") if isinstance(v, bool) else str(v)) for k, v in raw.items()}
    signature = sign("12345678", as_text, b"body")
    header = orjson.dumps(
        {"code": 310, "extFields": {**raw, "Signature": signature}, "flag": 0, "language": "CPP", "opaque": 1,
         "version": 333}
    )  # fmt: skip
    cmd = decode_frame(frame(header, b"body")[4:])
    assert cmd.ext_fields["d"] == "4" and cmd.ext_fields["m"] == "true"
    assert verify("12345678", cmd.ext_fields, cmd.body)


@pytest.mark.parametrize(
    "tamper",
    [
        lambda ext, body: (ext, body + b"x"),  # replayed signature on an altered body
        lambda ext, body: ({**ext, "topic": "Other"}, body),  # altered header
        lambda ext, body: ({**ext, "extra": "1"}, body),  # a field added after signing
        lambda ext, body: ({k: v for k, v in ext.items() if k != "Signature"}, body),  # no signature
        lambda ext, body: ({**ext, "Signature": ext["Signature"][:-2]}, body),  # truncated
        lambda ext, body: ({**ext, "Signature": "é" * 28}, body),  # not Base64, not ASCII
    ],
)
def test_tampered_requests_fail(tamper: object) -> None:
    cmd = RemotingCommand(code=310, ext_fields={"topic": "T", "a": "G"}, body=b"payload")
    sign_command(cmd, Credentials("rocketmq2", "12345678"))
    ext, body = tamper(cmd.ext_fields, cmd.body)  # type: ignore[operator]
    assert not verify("12345678", ext, body)


def test_wrong_secret_fails() -> None:
    cmd = RemotingCommand(code=11, ext_fields={"topic": "T"})
    sign_command(cmd, Credentials("rocketmq2", "12345678"))
    assert verify("12345678", cmd.ext_fields, cmd.body)
    assert not verify("12345679", cmd.ext_fields, cmd.body)


def test_sign_command_does_not_change_the_callers_dict() -> None:
    shared = {"topic": "T"}
    cmd = RemotingCommand(code=11, ext_fields=shared)
    sign_command(cmd, Credentials("ak", "sk", security_token="tok"))
    assert shared == {"topic": "T"}
    assert cmd.ext_fields["AccessKey"] == "ak" and cmd.ext_fields["SecurityToken"] == "tok"
    # re-signing (a retry) replaces the old signature rather than signing it
    first = cmd.ext_fields["Signature"]
    sign_command(cmd, Credentials("ak", "sk", security_token="tok"))
    assert cmd.ext_fields["Signature"] == first


def test_credentials_never_show_the_secret() -> None:
    creds = Credentials("alice", "s3cr3t-value", security_token="tok3n")
    for text in (repr(creds), str(creds), f"{creds}", repr([creds])):
        assert "s3cr3t-value" not in text and "tok3n" not in text
    with pytest.raises(ValueError, match="secret key") as info:
        Credentials("alice", "")
    assert "alice" in str(info.value)
