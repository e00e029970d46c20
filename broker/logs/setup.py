"""Where a server process's log records go: the console (stderr) always, and a size-rotated file when
logRoot is set; both in the one format the config picks.

The config that names the file and format is itself read with logging on (an unknown key is a WARNING), so
`start()` holds the records of that phase in memory and `configure()` writes them out through the real
handlers: a config warning lands in the file and on the console like any other line.
"""

from __future__ import annotations

import logging
import sys
import threading
from logging.handlers import RotatingFileHandler
from types import TracebackType

from broker.logs.formats import LogFormat, formatter
from broker.logs.settings import LogSettings

__all__ = ["announce", "configure", "start"]

log = logging.getLogger("broker.logs")

_format: LogFormat = "text"


class _Held(logging.Handler):
    """The records logged before configure(): replayed through its handlers."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def start(level: str = "INFO") -> None:
    """Before the config is read: hold records until configure()."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.addHandler(_Held())
    root.setLevel(level.upper())


def configure(settings: LogSettings, level: str = "INFO") -> None:
    """The console and (when settings.file) the rotated file; records held since start() are written now."""
    global _format
    _format = settings.format
    root = logging.getLogger()
    held = [r for h in root.handlers if isinstance(h, _Held) for r in h.records]
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()
    fmt = formatter(settings.format)
    console = logging.StreamHandler(sys.stderr)
    handlers: list[logging.Handler] = [console]
    file_error: OSError | None = None
    if settings.file is not None:
        try:
            settings.file.parent.mkdir(parents=True, exist_ok=True)
            # append: the previous run's lines stay (after a crash they are the ones that matter)
            handlers.append(
                RotatingFileHandler(
                    settings.file, maxBytes=settings.max_size, backupCount=settings.backups, encoding="utf-8"
                )
            )
        except OSError as exc:
            file_error = exc
    for handler in handlers:
        handler.setFormatter(fmt)
        root.addHandler(handler)
    root.setLevel(level.upper())
    for record in held:
        if record.levelno >= root.level:
            root.handle(record)
    if file_error is not None:
        log.error("cannot write the log file %s: %s; logging to the console only", settings.file, file_error)
    logging.captureWarnings(True)
    sys.excepthook = _log_uncaught
    threading.excepthook = _log_uncaught_in_thread


def announce(message: str, logger: str) -> None:
    """A line on stdout for whoever waits for it (`boot success`): as is in text, a JSON record in json."""
    if _format == "json":
        record = logging.LogRecord(logger, logging.INFO, "", 0, message, None, None)
        message = formatter("json").format(record)
    sys.stdout.write(message + "\n")
    sys.stdout.flush()


def _log_uncaught(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
    # in the log file too, in its format, not only as a bare traceback on stderr
    if issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, value, tb)
        return
    logging.getLogger("broker").critical("uncaught exception, exiting", exc_info=(kind, value, tb))


def _log_uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
    if args.exc_value is None or issubclass(args.exc_type, SystemExit):
        return
    name = args.thread.name if args.thread is not None else "?"
    logging.getLogger("broker").error(
        "uncaught exception in thread %s", name, exc_info=(args.exc_type, args.exc_value, args.exc_traceback)
    )
