"""How the producer waits between send attempts, and what it says when a send runs out of time.

`producer.py` retries a send within sendMsgTimeout. A failed attempt moves at once to another broker when
fault avoidance has one; when it has none (one broker, or every broker sidelined) the next attempt waits a
`Backoff` first, so a dead broker costs a few attempts per send instead of a busy loop. When the time is up,
`unreachable()` turns the last failure into a `BrokerUnreachable` that says which broker and why: a broker
that stopped is not a topic that does not exist. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from broker.client.errors import BrokerUnreachable

__all__ = ["Backoff", "unreachable", "vanished"]


@dataclass(slots=True)
class Backoff:
    """Exponential delays: initial, 2x initial, ... capped at `maximum`, never past the time left."""

    initial: float = 0.1
    maximum: float = 1.0
    _next: float = 0.0

    def delay(self, remaining: float) -> float:
        current = self._next or self.initial
        self._next = min(current * 2, self.maximum)
        return max(0.0, min(current, self.maximum, remaining))


def _brokers(addrs: dict[str, str]) -> str:
    return ", ".join(f"{name} ({addr})" if addr else name for name, addr in sorted(addrs.items()))


def unreachable(
    topic: str,
    brokers: dict[str, str],
    cause: BaseException,
    attempts: int,
    elapsed: float,
) -> BrokerUnreachable:
    """The error of a send whose brokers (name -> address) did not answer within its time budget."""
    return BrokerUnreachable(
        f"cannot send to topic {topic}: broker {_brokers(brokers)} is unreachable ({type(cause).__name__}: {cause});"
        f" {attempts} attempt(s) in {elapsed:.1f} s, the send timeout"
    )


def vanished(
    topic: str,
    brokers: dict[str, str],
    namesrvs: Iterable[str],
    attempts: int,
    elapsed: float,
) -> BrokerUnreachable:
    """The error of a send whose topic's brokers left the NameServer (stopped, or lost its connection)."""
    where = ";".join(namesrvs)
    if brokers:
        what = f"broker {_brokers(brokers)}, which served it, is unreachable: the NameServer {where} no longer lists it"
    else:
        what = f"no broker is registered with the NameServer {where}"
    return BrokerUnreachable(
        f"cannot send to topic {topic}: {what} (stopped or not started?);"
        f" {attempts} attempt(s) in {elapsed:.1f} s, the send timeout"
    )
