"""KV config store of the NameServer (namespace -> key -> value), persisted to kvConfigPath.

Called by the KV processors (PUT/GET/DELETE_KV_CONFIG, GET_KVLIST_BY_NAMESPACE) and by route
lookups (ORDER_TOPIC_CONFIG). The file layout is RocketMQ's `{"configTable":{ns:{k:v}}}`. Writes are
done off the event loop by one writer task, always of the latest snapshot, so a burst of PUTs costs
one or two file writes and the loop never blocks on the disk.
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
from pathlib import Path

import orjson

__all__ = ["ORDER_TOPIC_CONFIG", "KVConfigManager"]

log = logging.getLogger(__name__)

ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


class KVConfigManager:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._table: dict[str, dict[str, str]] = {}
        self._dirty = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None

    def load(self) -> None:
        """Read the file if present (blocking; called once before the server starts)."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            log.error("ignoring unreadable KV config %s: %s", self.path, exc)
            return
        table = data.get("configTable") if isinstance(data, dict) else None
        if isinstance(table, dict):
            self._table = {
                str(ns): {str(k): str(v) for k, v in kv.items()} for ns, kv in table.items() if isinstance(kv, dict)
            }
            log.info("loaded %d KV config namespaces from %s", len(self._table), self.path)

    def start(self) -> None:
        self._writer = asyncio.get_running_loop().create_task(self._write_loop())

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.cancel()
            self._writer = None
        if self._dirty.is_set():
            await asyncio.to_thread(self._write, self._snapshot())

    def put(self, namespace: str, key: str, value: str) -> None:
        self._table.setdefault(namespace, {})[key] = value
        self._dirty.set()

    def get(self, namespace: str, key: str) -> str | None:
        return self._table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        kv = self._table.get(namespace)
        if kv is not None and kv.pop(key, None) is not None:
            if not kv:
                del self._table[namespace]
            self._dirty.set()

    def namespace(self, namespace: str) -> dict[str, str] | None:
        kv = self._table.get(namespace)
        return dict(kv) if kv else None

    def _snapshot(self) -> bytes:
        return orjson.dumps({"configTable": self._table}, option=orjson.OPT_INDENT_2)

    async def _write_loop(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            try:
                await asyncio.to_thread(self._write, self._snapshot())
            except OSError as exc:
                log.error("cannot persist KV config to %s: %s", self.path, exc)

    def _write(self, data: bytes) -> None:
        # Write a temp file and rename it, so a crash never leaves a half-written config.
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=self.path.name, dir=self.path.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
