"""The broker's request error: raised by processors, answered with its code and remark.

Processors raise `RequestError(code, remark)` for every expected rejection (bad topic, oversized
message, missing group...); the transport's dispatcher (or the send processor's own task) turns any
exception with a `response_code` into that response, so the connection stays healthy.
"""

from __future__ import annotations

__all__ = ["RequestError"]


class RequestError(Exception):
    """A request that gets an error response: `code` is a ResponseCode, `remark` says why."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = int(code)
        self.remark = remark

    @property
    def response_code(self) -> int:
        return self.code
