"""`mqbroker`: start a broker, RocketMQ style (`mqbroker -n 127.0.0.1:9876 -c broker.conf`, `-p` to print
the effective configuration and exit).

The console script declared in pyproject.toml; `make run`, the images and the operator start it.
SIGTERM / SIGINT shut the broker down gracefully (a second signal stops at once). Only this module
(with the other CLI modules) calls sys.exit.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from broker.cli._common import configure_logging, console_logging, serve_until_signalled, start_logging
from broker.config.errors import ConfigError
from broker.config.properties import load_properties
from broker.logs.settings import LogSettings
from broker.logs.setup import announce
from broker.server.broker import BrokerController
from broker.server.config import LoadedConfig, effective_properties, env_overrides, load_broker_config
from broker.store.results import StoreError
from broker.transport.loop import run

if TYPE_CHECKING:
    from broker.grpc.endpoint import GrpcEndpoint

__all__ = ["build_config", "main"]

log = logging.getLogger("broker.cli.mqbroker")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mqbroker", description="Start a RocketMQ-compatible broker.")
    parser.add_argument("-c", "--configFile", dest="config_file", help="broker config properties file (broker.conf)")
    parser.add_argument("-n", "--namesrvAddr", dest="namesrv_addr", help="name server addresses, ';'-separated")
    parser.add_argument(
        "-p",
        "--printConfigItem",
        dest="print_config",
        action="store_true",
        help="print the effective configuration as key=value and exit",
    )
    parser.add_argument("-m", "--printImportantConfig", dest="print_config", action="store_true", help="same as -p")
    parser.add_argument(
        "--enable-proxy",
        dest="enable_proxy",
        action="store_true",
        help="also serve the gRPC API (apache.rocketmq.v2) on grpcServerPort, as enableProxy=true does",
    )
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    return parser


def build_config(config_file: str | None, namesrv_addr: str | None, enable_proxy: bool = False) -> LoadedConfig:
    """Defaults <- NAMESRV_ADDR / BROKER_IP1 env <- broker.conf <- -n (the command line wins, as in BrokerStartup)."""
    props = load_properties(config_file) if config_file else {}
    overrides = env_overrides(properties=props)
    if namesrv_addr:
        overrides["namesrvAddr"] = namesrv_addr
    if enable_proxy:
        overrides["enableProxy"] = "true"
    loaded = load_broker_config(props, overrides, origin=config_file or "command line")
    loaded.source = Path(config_file) if config_file else None
    return loaded


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    start_logging(args.log_level)
    try:
        loaded = build_config(args.config_file, args.namesrv_addr, args.enable_proxy)
    except ConfigError as exc:
        console_logging(args.log_level)
        print(f"mqbroker: {exc}", file=sys.stderr)
        sys.exit(1)
    if args.print_config:
        console_logging(args.log_level)
        for key, value in effective_properties(loaded).items():
            sys.stdout.write(f"{key}={value}\n")
        sys.exit(0)
    configure_logging(
        LogSettings.of(loaded.broker, "broker.log"),
        args.log_level,
        effective_properties(loaded),
        effective_properties(load_broker_config({}, origin="defaults")),
    )
    if args.config_file:
        log.info("load config properties file OK, %s", args.config_file)
    try:
        run(_serve(loaded))
    except (OSError, StoreError) as exc:
        log.error("The broker failed to start: %s", exc)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)


async def _serve(loaded: LoadedConfig) -> None:
    controller = BrokerController(loaded)

    def started() -> None:
        # Printed once the store has recovered, the processors serve requests and the first registration
        # round is over: `make run` and scripts wait for this line, not for the port (it opens before recovery).
        c = loaded.broker
        announce(
            f"The broker[{c.broker_name}, {c.broker_addr}] boot success. serializeType=JSON"
            + (f" and name server is {c.namesrv_addr}" if c.namesrv_addr else ""),
            log.name,
        )
        registrar = controller.registrar
        if c.namesrv_addr and not registrar.last_ok_ms:
            failures = "; ".join(f"{addr}: {why}" for addr, why in sorted(registrar.last_results.items()))
            announce(f"not registered with any name server yet ({failures}); retrying periodically", log.name)

    # The gRPC endpoint (broker.grpc) serves over the broker's own processors, so it starts after them and stops
    # first; imported only when on (its stubs are the optional `grpc` extra).
    endpoint: GrpcEndpoint | None = None

    async def start() -> None:
        nonlocal endpoint
        await controller.start()
        if loaded.broker.enable_proxy:
            from broker.grpc.endpoint import GrpcEndpoint

            endpoint = GrpcEndpoint(controller)
            try:
                await endpoint.start()
            except BaseException:
                await controller.shutdown()
                raise

    async def stop() -> None:
        if endpoint is not None:
            await endpoint.stop()
        await controller.shutdown()

    await serve_until_signalled(start, stop, started)


if __name__ == "__main__":
    main()
