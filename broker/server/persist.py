"""Persistence of the broker's JSON config files (topics, offsets, groups, delay offsets).

The managers in broker/server call `JsonFile(path).load()` / `.save(data)`. The atomic write
(temp file, fsync, rename, `.bak` kept) and the fastjson-tolerant read are the store's
`config_files.ConfigFile`; this module only fixes the one place the broker depends on it.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from broker.store.config_files import ConfigFile

__all__ = ["JsonFile"]

log = logging.getLogger(__name__)


class JsonFile:
    """One config file under `<storePathRootDir>/config/`."""

    __slots__ = ("_file", "path")

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._file = ConfigFile(self.path)

    def load(self) -> dict[str, Any] | None:
        """The file's content, or None when neither it nor its `.bak` exists."""
        data = self._file.load()
        if data is not None and not isinstance(data, dict):
            log.warning("%s does not hold a JSON object; ignoring it", self.path)
            return None
        return data

    def save(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file.save(data)
