"""The subcommand table: each command module registers its functions here with RocketMQ's name and flags.

A command is `async def run(args, admin) -> int` over one started Admin (broker.client.admin); `main` builds
the argparse parser from this table, runs the chosen command and turns the errors below into an exit status.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from broker.client.admin import Admin
from broker.client.config import ClientConfig

__all__ = [
    "COMMANDS",
    "Argument",
    "Command",
    "UnknownName",
    "UsageError",
    "arg",
    "boolean",
    "command",
    "count",
    "producer_config",
]

Command = Callable[[argparse.Namespace, Admin], Awaitable[int]]
Argument = tuple[tuple[str, ...], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Registered:
    help: str
    run: Command
    arguments: tuple[Argument, ...]


COMMANDS: dict[str, Registered] = {}


class UnknownName(Exception):
    """A topic, group, broker or message named on the command line does not exist; the message says which
    and how to find the right name."""


class UsageError(Exception):
    """Flags that parse but do not make sense together (RocketMQ prints a hint and exits 0; we exit 2)."""


def producer_config(admin: Admin) -> ClientConfig:
    """The client settings of a producer a command starts: the Admin's (NameServers, TLS), as its own client."""
    return dataclasses.replace(admin.instance.config, instance_name=str(os.getpid()))


def arg(*flags: str, **options: Any) -> Argument:
    return flags, options


def command(name: str, help_text: str, *arguments: Argument) -> Callable[[Command], Command]:
    """Register the decorated coroutine function as subcommand `name` (RocketMQ's spelling)."""

    def register(run: Command) -> Command:
        COMMANDS[name] = Registered(help_text, run, arguments)
        return run

    return register


def boolean(text: str) -> bool:
    """A true|false flag value, as RocketMQ's Boolean.parseBoolean reads it but strict: a typo is an error,
    not a silent false."""
    if text.strip().lower() in ("true", "false"):
        return text.strip().lower() == "true"
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def count(text: str) -> int:
    """A positive whole number (message counts, sizes, amounts)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value}")
    return value
