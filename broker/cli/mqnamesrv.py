"""`mqnamesrv`: start a NameServer, RocketMQ style (`mqnamesrv -c namesrv.properties`, `-p` to print config).

The console script declared in pyproject.toml; the Helm chart, images and `make run` start it. This
is the only place (with the other CLI modules) that calls sys.exit.
"""

from __future__ import annotations

import argparse
import logging
import sys

from broker.cli._common import configure_logging, console_logging, serve_until_signalled, start_logging
from broker.config.effective import properties_of
from broker.config.errors import ConfigError
from broker.config.properties import load_properties
from broker.config.typed import dump_properties
from broker.controller.config import ControllerConfig
from broker.logs.settings import LogSettings
from broker.logs.setup import announce
from broker.namesrv.config import NamesrvConfig
from broker.namesrv.controller import NamesrvController
from broker.transport.loop import run

__all__ = ["build_config", "main"]

log = logging.getLogger("broker.cli.mqnamesrv")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mqnamesrv", description="Start a RocketMQ-compatible NameServer.")
    parser.add_argument("-c", "--configFile", dest="config_file", help="NameServer config properties file")
    parser.add_argument(
        "-p",
        "--printConfigItem",
        dest="print_config",
        action="store_true",
        help="print the effective configuration and exit",
    )
    parser.add_argument(
        "-n",
        "--namesrvAddr",
        dest="namesrv_addr",
        help="accepted for RocketMQ compatibility; a NameServer does not use it",
    )
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    return parser


def build_config(config_file: str | None) -> NamesrvConfig:
    """Effective config: defaults, overridden by the properties file when given."""
    if config_file is None:
        return NamesrvConfig()
    return NamesrvConfig.from_properties(load_properties(config_file), source=config_file)


def build_controller_config(config_file: str | None, config: NamesrvConfig) -> ControllerConfig | None:
    """The embedded controller's config, from the same file, when enableControllerInNamesrv=true."""
    if not config.enable_controller_in_namesrv or config_file is None:
        return None
    return ControllerConfig.from_properties(load_properties(config_file), source=config_file, warn_unknown=False)


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    start_logging(args.log_level)
    try:
        config = build_config(args.config_file)
        controller = build_controller_config(args.config_file, config)
        if config.enable_controller_in_namesrv and controller is None:
            raise ConfigError("enableControllerInNamesrv=true needs a config file with the controller keys")
    except ConfigError as exc:
        console_logging(args.log_level)
        print(f"mqnamesrv: {exc}", file=sys.stderr)
        sys.exit(1)
    if args.print_config:
        console_logging(args.log_level)  # the held warnings (an unknown key) reach stderr, as with mqbroker -p
        sys.stdout.write(dump_properties(config))
        sys.exit(0)
    configure_logging(
        LogSettings.of(config, "namesrv.log"), args.log_level, properties_of(config), properties_of(NamesrvConfig())
    )
    if args.namesrv_addr:
        log.info("ignoring -n %s: a NameServer does not connect to other NameServers", args.namesrv_addr)
    if args.config_file:
        log.info("load config properties file OK, %s", args.config_file)
    try:
        run(_serve(config, controller))
    except OSError as exc:
        log.error("The Name Server failed to start: %s", exc)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)


async def _serve(config: NamesrvConfig, controller_config: ControllerConfig | None) -> None:
    controller = NamesrvController(config, controller_config)

    def started() -> None:
        message = (
            f"The Name Server boot success. serializeType=JSON, address {controller.server.host}:{controller.port}"
        )
        announce(message, log.name)
        log.info(message)

    await serve_until_signalled(controller.start, controller.shutdown, started)
    log.info("The Name Server shutdown OK")


if __name__ == "__main__":
    main()
