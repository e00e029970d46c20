"""The consume-mode switch: which topic/group pairs consume by POP, and the server-side assignment of queues.

SET_MESSAGE_REQUEST_MODE stores `{topic, consumerGroup, mode, popShareQueueNum}` per topic and group in
`config/messageRequestMode.json` (`{"messageRequestModeMap": {topic: {group: body}}}`), GET_ALL_MESSAGE_REQUEST_MODE
returns that JSON, and QUERY_ASSIGNMENT answers a client with its queues and their mode (reference A.10).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from broker.server.persist import JsonFile

__all__ = ["MessageRequestModeManager", "assign_queues"]


class MessageRequestModeManager:
    def __init__(self, config_dir: Path) -> None:
        self._file = JsonFile(config_dir / "messageRequestMode.json")
        self.table: dict[str, dict[str, dict[str, Any]]] = {}

    def load(self) -> None:
        data = self._file.load() or {}
        table = data.get("messageRequestModeMap") or {}
        if isinstance(table, dict):
            self.table = {t: dict(g) for t, g in table.items() if isinstance(g, dict)}

    def snapshot(self) -> dict[str, Any]:
        return {"messageRequestModeMap": self.table}

    def set(self, topic: str, group: str, mode: str, pop_share_queue_num: int) -> None:
        self.table.setdefault(topic, {})[group] = {
            "topic": topic,
            "consumerGroup": group,
            "mode": mode,
            "popShareQueueNum": pop_share_queue_num,
        }
        self._file.save(self.snapshot())

    def get(self, topic: str, group: str) -> dict[str, Any] | None:
        return self.table.get(topic, {}).get(group)


def assign_queues(queue_ids: list[int], clients: list[str], client_id: str, mode: str, pop_share: int) -> list[int]:
    """The queues a client gets: every queue as -1 for POP shared by all, else an averaged share (plus the next
    `pop_share` clients' shares for POP)."""
    if mode == "POP" and (pop_share <= 0 or pop_share >= len(clients) - 1):
        return [-1]
    ordered = sorted(clients)
    if client_id not in ordered:
        return []
    me = ordered.index(client_id)
    n = len(ordered)
    owners = [me] + ([(me + i) % n for i in range(1, pop_share + 1)] if mode == "POP" else [])
    picked: list[int] = []
    for owner in owners:
        picked += [q for i, q in enumerate(sorted(queue_ids)) if i % n == owner]
    return sorted(set(picked))
