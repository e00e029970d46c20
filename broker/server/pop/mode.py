"""The consume-mode switch: which topic/group pairs consume by POP, and the server-side assignment of queues.

SET_MESSAGE_REQUEST_MODE stores `{topic, consumerGroup, mode, popShareQueueNum}` per topic and group in
`config/messageRequestMode.json` (`{"messageRequestModeMap": {topic: {group: body}}}`), GET_ALL_MESSAGE_REQUEST_MODE
returns that JSON, and QUERY_ASSIGNMENT answers a client with its queues and their mode (reference A.10).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from broker.server.persist import JsonFile

__all__ = ["MessageRequestModeManager", "assign_queues", "average_share"]


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


def average_share(queue_ids: list[int], clients: list[str], client_id: str) -> list[int]:
    """RocketMQ's AllocateMessageQueueAveragely: contiguous blocks, the first `len % n` clients one queue more."""
    ordered, queues = sorted(clients), sorted(queue_ids)
    if client_id not in ordered or not queues:
        return []
    index, n, total = ordered.index(client_id), len(ordered), len(queues)
    mod = total % n
    size = 1 if total <= n else total // n + (1 if mod > 0 and index < mod else 0)
    start = index * size if mod > 0 and index < mod else index * size + mod
    return [queues[(start + i) % total] for i in range(max(0, min(size, total - start)))]


def assign_queues(queue_ids: list[int], clients: list[str], client_id: str, mode: str, pop_share: int) -> list[int]:
    """The queues a client gets: every queue as -1 for POP shared by all, else its average share (plus the next
    `pop_share` clients' shares for POP)."""
    if mode == "POP" and (pop_share <= 0 or pop_share >= len(clients) - 1):
        return [-1]
    ordered = sorted(clients)
    if client_id not in ordered:
        return []
    owners = [client_id]
    if mode == "POP":
        me = ordered.index(client_id)
        owners += [ordered[(me + i) % len(ordered)] for i in range(1, pop_share + 1)]
    picked: set[int] = set()
    for owner in owners:
        picked.update(average_share(queue_ids, ordered, owner))
    return sorted(picked)
