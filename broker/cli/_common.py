"""Helpers shared by the CLI entry points (mqnamesrv, mqbroker): logging setup and signal-driven runs.

Only broker.cli modules import this; it is where a process decides how to log and when to stop.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Awaitable, Callable

__all__ = ["serve_until_signalled", "setup_logging"]

log = logging.getLogger(__name__)

LOG_FORMAT = "%(asctime)s %(levelname)-5s %(name)s - %(message)s"


def setup_logging(level: str = "INFO") -> None:
    logging.basicConfig(level=level.upper(), format=LOG_FORMAT, stream=sys.stderr)


async def serve_until_signalled(
    start: Callable[[], Awaitable[None]],
    stop: Callable[[], Awaitable[None]],
    on_started: Callable[[], None] | None = None,
) -> None:
    """Run `start()`, wait for SIGTERM or SIGINT, then `stop()`. A second signal stops without grace."""
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    main_task = asyncio.current_task()
    signals = (signal.SIGTERM, signal.SIGINT)

    def on_signal(signum: int) -> None:
        if stopping.is_set():
            log.warning("second %s: stopping at once", signal.Signals(signum).name)
            if main_task is not None:
                main_task.cancel()
            return
        log.info("received %s, shutting down", signal.Signals(signum).name)
        stopping.set()

    for signum in signals:
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        await start()
        if on_started is not None:
            on_started()
        await stopping.wait()
        await stop()
    finally:
        for signum in signals:
            loop.remove_signal_handler(signum)
