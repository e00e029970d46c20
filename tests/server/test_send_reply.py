"""The send path's reply templates (_STORED_REPLY, _OK_REPLY) write exactly what the generic encoder would."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from broker.protocol.codes import ResponseCode
from broker.protocol.command import RemotingCommand, encode
from broker.server.processors.send import _MSG_REGION, SendProcessor
from broker.server.put_rules import PUT_STATUS_CODES
from broker.store.results import PutResult, PutStatus


@pytest.mark.parametrize(
    ("status", "offsets", "uniq"),
    [
        (PutStatus.PUT_OK, (), "7F0000010001AB12CD34EF5600000001"),
        (PutStatus.PUT_OK, (), 'a client\'s own "id" \\ ünïcode'),  # one stored message: the _OK_REPLY path
        (PutStatus.PUT_OK, (100, 1300, 2500), "A,B,C"),
        (PutStatus.FLUSH_DISK_TIMEOUT, (), 'odd "id" \\ with\ncontrol \x01 and ünïcode'),
        (PutStatus.SLAVE_NOT_AVAILABLE, (), ""),
    ],
)
def test_stored_reply_is_the_generic_encoding(status: PutStatus, offsets: tuple[int, ...], uniq: str) -> None:
    processor: Any = SendProcessor.__new__(SendProcessor)
    processor.broker = SimpleNamespace(stats=SimpleNamespace(put=lambda n: None))
    result = PutResult(status, 123456789, 1200, 4567, 1_700_000_000_000, len(offsets) or 1, offsets, "7F00000100002A9F")
    request = RemotingCommand(code=310, opaque=2_000_000_001, ext_fields={"a": "PG"})
    code = PUT_STATUS_CODES[status]
    ext = {
        "msgId": ",".join(result.msg_ids),
        "queueId": "3",
        "queueOffset": "4567",
        "transactionId": uniq,
        "MSG_REGION": _MSG_REGION,
        "TRACE_ON": "true",
    }
    expected = encode(request.response(code, None if code == ResponseCode.SUCCESS else status.name, ext))
    assert processor._response(request, result, 3, uniq) == expected
