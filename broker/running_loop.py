"""The running event loop of this thread, or None, found without importing asyncio.

A process that never imported asyncio has no loop: the index helper process (broker.store.index_helper)
shares the store's modules with the broker, and this keeps asyncio (and the ssl it loads, several MiB
resident) out of it.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio

__all__ = ["running_loop"]


def running_loop() -> asyncio.AbstractEventLoop | None:
    aio = sys.modules.get("asyncio")
    if aio is None:
        return None
    try:
        loop: asyncio.AbstractEventLoop = aio.get_running_loop()
    except RuntimeError:
        return None
    return loop
