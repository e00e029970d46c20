"""RaftState: the controller's `ReplicasState`, replicated among the controllers by pysyncobj's Raft.

Each change of state is a pysyncobj `@replicated` call: the leader appends it to the Raft log, and every
controller applies it, in log order, to its own `ReplicasState` once a majority holds it. The calls carry
everything they decide on (broker.controller.state), so every replica computes the same answer; the leader's
answer is handed back to the asyncio loop that proposed it. pysyncobj runs its own thread: applies and the
loop's reads take one lock, and the loop learns results through `call_soon_threadsafe`.

A new leader serves only once a barrier entry of its own term is applied: then it has applied every entry
an earlier leader committed, so its answers are not older than what a broker was already told.
The log and snapshots live under controllerStorePath (a restarted controller replays them).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, SyncObjConsumer, replicated

from broker.controller.config import ControllerConfig, Peer
from broker.controller.state import BrokerGroup, Candidate, ElectOutcome, Outcome, ReplicasState

__all__ = ["NotLeader", "ProposalFailed", "RaftState"]

log = logging.getLogger(__name__)

T = TypeVar("T")

_LEADER = 2  # pysyncobj's _RAFT_STATE.LEADER


class NotLeader(Exception):
    """This controller is not (or no longer) the Raft leader."""


class ProposalFailed(Exception):
    """The Raft log did not take the change (leadership moved, queue full, or timeout)."""


class _Replicated(SyncObjConsumer):  # type: ignore[misc]
    """The replicated object: what pysyncobj snapshots is `state` (the lock is set before the base class
    records its own attributes, so it is not part of a snapshot)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        super().__init__()
        self.state = ReplicasState()

    @replicated  # type: ignore[untyped-decorator]
    def barrier(self, marker: int) -> int:
        return marker

    @replicated  # type: ignore[untyped-decorator]
    def apply_broker_id(self, cluster: str, name: str, broker_id: int, check_code: str) -> Outcome:
        with self.lock:
            return self.state.apply_broker_id(cluster, name, broker_id, check_code)

    @replicated  # type: ignore[untyped-decorator]
    def apply_broker_address(self, name: str, broker_id: int, address: str) -> Outcome:
        with self.lock:
            return self.state.apply_broker_address(name, broker_id, address)

    @replicated  # type: ignore[untyped-decorator]
    def apply_elect_master(
        self, name: str, requester: int, designated: bool, alive: list[Candidate], unclean: bool
    ) -> ElectOutcome:
        with self.lock:
            return self.state.apply_elect_master(name, requester, designated, alive, unclean)

    @replicated  # type: ignore[untyped-decorator]
    def apply_alter_sync_state_set(
        self, name: str, master: int, master_epoch: int, new_set: set[int], set_epoch: int, alive: set[int]
    ) -> Outcome:
        with self.lock:
            return self.state.apply_alter_sync_state_set(name, master, master_epoch, new_set, set_epoch, alive)

    @replicated  # type: ignore[untyped-decorator]
    def apply_clean_broker_data(self, name: str, ids: set[int] | None, living: bool, alive: set[int]) -> Outcome:
        with self.lock:
            return self.state.apply_clean_broker_data(name, ids, living, alive)


class RaftState:
    """This controller's Raft member. `start()` binds the Raft port; `propose()` changes the state."""

    def __init__(self, config: ControllerConfig, timeout: float = 5.0) -> None:
        self.config = config
        self.timeout = timeout
        self._peers_by_raft = {config.raft_address(p): p for p in config.peers}
        self._replicated = _Replicated()
        self._sync: SyncObj | None = None
        self._ready_lock = threading.Lock()
        self._serving = False
        self._barrier = 0

    def start(self) -> None:
        store: Path = self.config.store_path
        store.mkdir(parents=True, exist_ok=True)
        me = self.config.self_peer
        election = self.config.controller_raft_election_timeout / 1000
        raft_port = me.port + self.config.controller_raft_port_offset
        conf = SyncObjConf(
            password=self.config.raft_password,
            journalFile=str(store / "raft.journal"),
            fullDumpFile=str(store / "raft.snapshot"),
            # a fork of a process with threads and an event loop is unsafe: snapshot in the Raft thread
            useFork=False,
            raftMinTimeout=election * 0.5,
            raftMaxTimeout=election * 1.5,
            appendEntriesPeriod=election / 10,
            connectionRetryTime=election / 2,
            connectionTimeout=max(election * 2, 1.0),
            commandsWaitLeader=False,
            bindAddress=f"{self.config.raft_bind_address}:{raft_port}",
            onStateChanged=self._state_changed,
        )
        others = [self.config.raft_address(p) for p in self.config.peers if p != me]
        self._sync = SyncObj(self.config.raft_address(me), others, conf=conf, consumers=[self._replicated])

    def close(self) -> None:
        if self._sync is not None:
            self._sync.destroy()
            self._sync = None

    # -- leadership ---------------------------------------------------------------------------------

    def _state_changed(self, old: int, new: int) -> None:
        """pysyncobj's thread: a new leader proposes a barrier and serves once it is applied."""
        with self._ready_lock:
            self._serving = False
            self._barrier += 1
            marker = self._barrier
        if new != _LEADER:
            return

        def applied(result: Any, error: int) -> None:
            with self._ready_lock:
                if error == FAIL_REASON.SUCCESS and result == marker == self._barrier:
                    self._serving = True
                    log.info("controller %s is the leader and serves", self.config.controller_dleger_self_id)

        self._replicated.barrier(marker, callback=applied)

    @property
    def is_leader(self) -> bool:
        """True when this controller leads and has applied its term's barrier."""
        sync = self._sync
        with self._ready_lock:
            return sync is not None and self._serving and sync._isLeader()

    def leader(self) -> Peer | None:
        """The last known leader's peer entry (its request address), or None while there is none."""
        sync = self._sync
        if sync is None:
            return None
        node = sync._getLeader()
        if node is None:
            return None
        return self._peers_by_raft.get(node.address)

    # -- state --------------------------------------------------------------------------------------

    def read(self, reader: Callable[[ReplicasState], T]) -> T:
        """`reader(state)` under the apply lock (a read never sees half of an apply)."""
        with self._replicated.lock:
            return reader(self._replicated.state)

    def group(self, broker_name: str) -> BrokerGroup | None:
        return self.read(lambda s: s.group(broker_name))

    async def propose(self, method: str, *args: Any) -> Any:
        """Append `method(*args)` to the Raft log; the leader's result once a majority applied it."""
        if not self.is_leader:
            raise NotLeader()
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Any] = loop.create_future()

        def settle(result: Any, error: int) -> None:
            if done.done():
                return
            if error == FAIL_REASON.SUCCESS:
                done.set_result(result)
            elif error in (FAIL_REASON.NOT_LEADER, FAIL_REASON.LEADER_CHANGED):
                done.set_exception(NotLeader())
            else:
                done.set_exception(ProposalFailed(f"Raft refused the change (reason {error})"))

        def callback(result: Any, error: int) -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(settle, result, error)

        getattr(self._replicated, method)(*args, callback=callback)
        try:
            return await asyncio.wait_for(done, self.timeout)
        except TimeoutError:
            raise ProposalFailed(f"no Raft commit within {self.timeout:g} s") from None
