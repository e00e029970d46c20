"""`mqcontroller`: start a standalone controller, RocketMQ style (`mqcontroller -c controller.conf`, `-p`).

The console script declared in pyproject.toml. The controller serves its requests on its own entry of
controllerDLegerPeers (broker.controller.config).
"""

from __future__ import annotations

import argparse
import logging
import sys

from broker.cli._common import console_logging, serve_until_signalled, start_logging
from broker.config.errors import ConfigError
from broker.config.properties import load_properties
from broker.config.typed import dump_properties
from broker.controller.config import ControllerConfig
from broker.controller.manager import ControllerManager
from broker.logs.setup import announce
from broker.transport.loop import run

__all__ = ["build_config", "main"]

log = logging.getLogger("broker.cli.mqcontroller")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mqcontroller", description="Start a RocketMQ-compatible controller.")
    parser.add_argument("-c", "--configFile", dest="config_file", help="controller config properties file")
    parser.add_argument(
        "-p", "--printConfigItem", dest="print_config", action="store_true", help="print the effective config and exit"
    )
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    return parser


def build_config(config_file: str | None) -> ControllerConfig:
    """Effective config from the properties file (controllerDLegerPeers and controllerDLegerSelfId are needed)."""
    values = load_properties(config_file) if config_file is not None else {}
    return ControllerConfig.from_properties(values, source=config_file or "defaults")


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    start_logging(args.log_level)
    console_logging(args.log_level)
    try:
        config = build_config(args.config_file)
    except (ConfigError, OSError) as exc:
        print(f"mqcontroller: {exc}", file=sys.stderr)
        sys.exit(1)
    if args.print_config:
        sys.stdout.write(dump_properties(config))
        sys.exit(0)
    try:
        run(_serve(config))
    except OSError as exc:
        log.error("The controller failed to start: %s", exc)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)


async def _serve(config: ControllerConfig) -> None:
    manager = ControllerManager(config)

    def started() -> None:
        message = f"The ControllerManager boot success. serializeType=JSON, address {manager.server.address}"
        announce(message, log.name)
        log.info(message)

    await serve_until_signalled(manager.start, manager.shutdown, started)
    log.info("The ControllerManager shutdown OK")


if __name__ == "__main__":
    main()
