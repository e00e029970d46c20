"""Helpers shared by the CLI entry points (mqnamesrv, mqbroker): logging setup and signal-driven runs.

Only broker.cli modules import this; it is where a process decides how to log and when to stop.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable, Mapping

from broker.config.effective import non_default_lines
from broker.logs import setup as log_setup
from broker.logs.settings import LogSettings

__all__ = ["configure_logging", "console_logging", "serve_until_signalled", "start_logging"]

log = logging.getLogger(__name__)


def start_logging(level: str = "INFO") -> None:
    """Before the config is read: its warnings are held until the config says where logs go."""
    log_setup.start(level)


def console_logging(level: str = "INFO") -> None:
    """No usable config (an error, or -p): what was held goes to the console, in text."""
    log_setup.configure(LogSettings(), level)


def configure_logging(
    settings: LogSettings, level: str, effective: Mapping[str, str], defaults: Mapping[str, str]
) -> None:
    """Logs where the config says; then, once, the config keys that are not at their default."""
    log_setup.configure(settings, level)
    lines = non_default_lines(effective, defaults)
    log.info("effective configuration, %d keys not at their default:\n%s", len(lines), "\n".join(lines))


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
