"""One short, rate-limited line for each kind of request grpcio could not parse, instead of its traceback.

grpcio's asyncio server logs every request its protobuf deserializer refuses as an ERROR with a traceback (and
answers the client UNKNOWN with the parser's message). A peer sending junk would fill the broker's log that
way; this filter on grpcio's logger replaces those records with a WARNING per method every `DEFAULT_INTERVAL`.
"""

from __future__ import annotations

import logging
import re

from broker.log_limit import LimitedLog

__all__ = ["GRPC_LOGGER", "MalformedRequestFilter"]

GRPC_LOGGER = "grpc._cython.cygrpc"

_METHOD = re.compile(r"servicer method \[([^\]]+)\]")
_PARSE = re.compile(r"(Error parsing message[^\n]*)")


class MalformedRequestFilter(logging.Filter):
    """Drops grpcio's DecodeError records and reports them through a LimitedLog instead."""

    def __init__(self, limited: LimitedLog) -> None:
        super().__init__()
        self.limited = limited

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if "DecodeError" not in text or "servicer method" not in text:
            return True
        exc_text = text
        if record.exc_info is not None and record.exc_info[1] is not None:
            exc_text += str(record.exc_info[1])
        method = _METHOD.search(text)
        detail = _PARSE.search(exc_text)
        name = method.group(1) if method else "?"
        self.limited.warning(
            f"malformed {name}",
            "malformed gRPC request on %s refused: %s",
            name,
            detail.group(1) if detail else "protobuf parse error",
        )
        return False
