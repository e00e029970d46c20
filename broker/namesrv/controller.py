"""NamesrvController: wires config, route table, KV store, processors and the remoting server.

Created by broker.cli.mqnamesrv (and tests, and bench/namesrv.py): `await start()`, then
`await shutdown()`. It owns the liveness scanner (every scanNotActiveBrokerInterval ms) and the close
listener that drops a broker the moment its channel closes. With enableControllerInNamesrv it also runs the
controller of controller mode (broker.controller.manager), built from the same file's controller keys.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from broker.auth.service import ServerAuth
from broker.controller.config import ControllerConfig
from broker.metrics.settings import MetricsSettings
from broker.namesrv.config import NamesrvConfig
from broker.namesrv.kvconfig import KVConfigManager
from broker.namesrv.processors import NamesrvProcessors
from broker.namesrv.route import RouteInfoManager
from broker.transport.errors import CloseReason
from broker.transport.server import RemotingServer
from broker.transport.tls import ServerTls, TlsSettings

if TYPE_CHECKING:
    from broker.controller.manager import ControllerManager
    from broker.metrics.exporter import MetricsExporter

__all__ = ["NamesrvController"]

log = logging.getLogger(__name__)


class NamesrvController:
    def __init__(self, config: NamesrvConfig, controller: ControllerConfig | None = None) -> None:
        self.config = config
        if config.enable_controller_in_namesrv and controller is None:
            raise ValueError("enableControllerInNamesrv=true needs the controller keys (controllerDLegerPeers, ...)")
        self.controller: ControllerManager | None = None
        if controller is not None:
            # imported here: without controller mode the NameServer never loads pysyncobj (and cryptography)
            from broker.controller import manager

            self.controller = manager.ControllerManager(controller)
        self.routes = RouteInfoManager(
            default_timeout_ms=config.broker_channel_expired_time,
            delete_topic_with_broker_registration=config.delete_topic_with_broker_registration,
        )
        self.kv = KVConfigManager(config.kv_config_path)
        self.processors = NamesrvProcessors(config, self.routes, self.kv)
        self.server = RemotingServer(
            config.bind_address,
            config.listen_port,
            max_frame_length=config.frame_max_length,
            idle_timeout=config.server_channel_max_idle_time_seconds or None,
            tls=ServerTls(TlsSettings.of(config), name="namesrv"),  # the tls.* keys (broker.transport.tls)
        )
        self.processors.register(self.server.dispatcher)
        # authenticationEnabled (broker.auth): the writes need a signature by a user of the keys; before the metrics
        self.auth = ServerAuth.of_namesrv(config)
        self.auth.load()
        self.auth.install(self.server.dispatcher)
        # Metrics, when metricsExporterType=PROM: request latency per code and route table gauges
        settings = MetricsSettings.of(config)
        self.metrics: MetricsExporter | None = None
        if settings.enabled:
            # imported here: with metrics off the NameServer never loads prometheus_client
            from broker.metrics import exporter, namesrv_collector, rpc

            meter = rpc.RpcMeter()
            rpc.instrument(self.server.dispatcher, meter)
            self.metrics = exporter.MetricsExporter(settings, namesrv_collector.NamesrvCollector(self, meter))
        self.server.add_close_listener(self._channel_closed)
        self._scanner: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        return self.server.port

    async def start(self) -> None:
        if self.metrics is not None:
            await self.metrics.start()  # first: a metrics port in use fails the start before the others
        try:
            await self._start()
        except BaseException:
            if self.metrics is not None:
                await self.metrics.close()
            raise

    async def _start(self) -> None:
        await asyncio.to_thread(self.kv.load)
        self.kv.start()
        await self.server.start()
        if self.controller is not None:
            try:
                await self.controller.start()
            except BaseException:
                await self.server.shutdown(0)
                raise
        self._scanner = asyncio.get_running_loop().create_task(self._scan_loop())

    async def shutdown(self, grace: float = 5.0) -> None:
        if self._scanner is not None:
            self._scanner.cancel()
            self._scanner = None
        if self.metrics is not None:
            await self.metrics.close()
        if self.controller is not None:
            await self.controller.shutdown(grace)
        await self.server.shutdown(grace)
        await self.kv.close()

    def _channel_closed(self, conn: object, reason: CloseReason) -> None:
        self.routes.on_channel_closed(conn)

    async def _scan_loop(self) -> None:
        interval = self.config.scan_not_active_broker_interval / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                for live in self.routes.scan_not_active():
                    channel = live.channel
                    if channel is not None and not channel.is_closing:
                        channel.close(CloseReason.IDLE)
            except Exception:
                log.exception("broker liveness scan failed")
