"""ControllerClient: the requests a broker and mqadmin send to the controllers, with leader discovery.

Given the controller addresses (a broker's `controllerAddr`, mqadmin's `-a`, `;`-separated), it asks
CONTROLLER_GET_METADATA_INFO for the leader and sends the leader-only requests there; a reply of
CONTROLLER_NOT_LEADER, or a leader that cannot be reached, makes it look again once.
"""

from __future__ import annotations

import logging

from broker.protocol.codes import RequestCode, ResponseCode
from broker.protocol.command import RemotingCommand
from broker.transport.client import RemotingClient
from broker.transport.errors import RemotingError

__all__ = ["ControllerClient", "ControllerUnavailable", "split_addresses"]

log = logging.getLogger(__name__)


class ControllerUnavailable(RemotingError):
    """No controller answered, or none knows a leader."""


def split_addresses(text: str) -> list[str]:
    return [a.strip() for a in text.replace(",", ";").split(";") if a.strip()]


class ControllerClient:
    def __init__(self, addresses: list[str], client: RemotingClient | None = None, timeout: float = 3.0) -> None:
        if not addresses:
            raise ValueError("no controller address")
        self.addresses = addresses
        self.timeout = timeout
        self._own_client = client is None
        self.client = client or RemotingClient()
        self.leader: str | None = None

    async def close(self) -> None:
        if self._own_client:
            await self.client.close()

    async def metadata(self, address: str) -> RemotingCommand:
        cmd = RemotingCommand(code=RequestCode.CONTROLLER_GET_METADATA_INFO)
        return await self.client.invoke(address, cmd, self.timeout)

    async def find_leader(self) -> str:
        """Ask each controller in turn who leads; the first address given wins."""
        problems = []
        for address in self.addresses:
            try:
                reply = await self.metadata(address)
            except Exception as exc:
                problems.append(f"{address}: {exc}")
                continue
            leader = reply.ext_fields.get("controllerLeaderAddress", "")
            if reply.code == ResponseCode.SUCCESS and leader:
                self.leader = leader
                return leader
            problems.append(f"{address}: no leader known")
        raise ControllerUnavailable("; ".join(problems) or "no controller address")

    async def invoke_leader(self, cmd: RemotingCommand) -> RemotingCommand:
        """Send `cmd` to the leader, looking for it again once when it moved."""
        for attempt in range(2):
            leader = self.leader if self.leader and attempt == 0 else await self.find_leader()
            try:
                reply = await self.client.invoke(leader, _copy(cmd), self.timeout)
            except Exception as exc:
                log.info("controller %s did not answer: %s", leader, exc)
                self.leader = None
                continue
            if reply.code != ResponseCode.CONTROLLER_NOT_LEADER:
                return reply
            self.leader = None
        raise ControllerUnavailable("the controller leader moved and could not be found")

    async def elect_master(self, cluster: str, broker_name: str, broker_id: int) -> RemotingCommand:
        """CONTROLLER_ELECT_MASTER with designateElect, as `mqadmin electMaster`: make `broker_id` the master of
        `broker_name` (the controller refuses a broker outside the SyncStateSet). The leader's reply."""
        fields = {
            "clusterName": cluster,
            "brokerName": broker_name,
            "brokerId": str(broker_id),
            "designateElect": "true",
        }
        return await self.invoke_leader(RemotingCommand(code=RequestCode.CONTROLLER_ELECT_MASTER, ext_fields=fields))

    async def heartbeat_all(self, fields: dict[str, str]) -> None:
        """BROKER_HEARTBEAT, oneway, to every controller (each keeps its own liveness view)."""
        for address in self.addresses:
            cmd = RemotingCommand(code=RequestCode.BROKER_HEARTBEAT, ext_fields=dict(fields))
            try:
                await self.client.invoke_oneway(address, cmd)
            except Exception as exc:
                log.debug("heartbeat to controller %s failed: %s", address, exc)


def _copy(cmd: RemotingCommand) -> RemotingCommand:
    """A fresh command (a new opaque) for each try."""
    return RemotingCommand(code=cmd.code, ext_fields=dict(cmd.ext_fields), body=cmd.body)
