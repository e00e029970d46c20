"""Parse the command line, run one subcommand over a started Admin, and turn failures into exit statuses.

Unlike RocketMQ's mqadmin, which prints a stack trace and exits 0, every failure here is one line on
stderr (`mqadmin <command>: <what is wrong>`) and a non-zero status: 1 for a failed command, 2 for a
command line argparse rejects.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
import time
from collections.abc import Sequence

from broker.cli.mqadmin import (
    auth,
    brokers,
    connections,
    controller,
    groups,
    messages,
    namesrv,
    pop,
    reading,
    stats,
    topics,
)
from broker.cli.mqadmin.credentials import CredentialsError, tools_credentials
from broker.cli.mqadmin.registry import COMMANDS, UnknownName, UsageError
from broker.client.admin import Admin
from broker.client.config import NAMESRV_ADDR_ENV, ClientConfig, resolve_namesrv_addr
from broker.client.errors import NoNameServerError, NoPermission, RequestCodeNotSupported, RocketError
from broker.protocol.bodies import BodyError
from broker.transport.errors import RemotingError
from broker.transport.loop import run

__all__ = ["build_parser", "main"]

# imported for their @command registrations
_MODULES = (auth, brokers, connections, controller, groups, messages, namesrv, pop, reading, stats, topics)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mqadmin", description="RocketCluster admin tool (RocketMQ's mqadmin)")
    sub = parser.add_subparsers(dest="command", metavar="<command>", required=True)
    for name, registered in sorted(COMMANDS.items()):
        p = sub.add_parser(name, help=registered.help, description=registered.help)
        p.add_argument(
            "-n",
            dest="namesrvAddr",
            help=f"NameServer address(es), host:port;host:port (default: ${NAMESRV_ADDR_ENV})",
        )
        _tls_arguments(p)
        for flags, options in registered.arguments:
            p.add_argument(*flags, **options)
    return parser


def _tls_arguments(p: argparse.ArgumentParser) -> None:
    """RocketMQ's tools take -Dtls.enable=true and tls.client.* properties; these flags say the same."""
    tls = p.add_argument_group("TLS (a server with tls.server.mode=enforcing accepts nothing else)")
    tls.add_argument("--tls", action="store_true", help="connect with TLS (RocketMQ's -Dtls.enable=true)")
    tls.add_argument("--tls-ca", metavar="FILE", help="PEM file of the CA(s) to verify the servers with")
    tls.add_argument("--tls-cert", metavar="FILE", help="client certificate (PEM) for servers that ask for one")
    tls.add_argument("--tls-key", metavar="FILE", help="the client certificate's key (PEM)")
    tls.add_argument(
        "--tls-insecure", action="store_true", help="do not verify the server's certificate (test certificates only)"
    )


def client_config(args: argparse.Namespace) -> ClientConfig:
    """The Admin's client settings from -n and the TLS flags (any --tls-* flag implies --tls)."""
    # ACL: signed with $ROCKETMQ_HOME/conf/tools.yml's accessKey/secretKey, as RocketMQ's tools sign (AclUtils)
    config = ClientConfig(
        namesrv_addr=args.namesrvAddr, instance_name=f"admin-{time.monotonic_ns()}", credentials=tools_credentials()
    )
    wanted = args.tls or args.tls_ca or args.tls_cert or args.tls_insecure
    if not wanted:
        return config
    return dataclasses.replace(
        config,
        use_tls=True,
        tls_ca_file=args.tls_ca,
        tls_cert_file=args.tls_cert,
        tls_key_file=args.tls_key,
        tls_verify=not args.tls_insecure,
    )


async def _run(args: argparse.Namespace) -> int:
    async with Admin(client_config=client_config(args)) as admin:
        return int(await COMMANDS[args.command].run(args, admin))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        args.namesrvAddr = resolve_namesrv_addr(args.namesrvAddr)
    except NoNameServerError:
        parser.error(f"no NameServer address: pass -n host:9876 or set {NAMESRV_ADDR_ENV}")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s - %(message)s")
    try:
        return run(_run(args))
    except BrokenPipeError:
        # the reader went away (`mqadmin ... | head`): nothing failed; silence the flush at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (UnknownName, UsageError) as exc:
        print(f"mqadmin {args.command}: {exc}", file=sys.stderr)
        return 1
    except CredentialsError as exc:
        print(f"mqadmin {args.command}: {exc}", file=sys.stderr)
        return 1
    except NoPermission as exc:
        print(
            f"mqadmin {args.command}: access denied: {exc}\n(mqadmin signs with accessKey/secretKey of "
            "$ROCKETMQ_HOME/conf/tools.yml; a user with the right ACL, or a Super user, may do this)",
            file=sys.stderr,
        )
        return 1
    except RequestCodeNotSupported as exc:
        print(f"mqadmin {args.command}: the server does not support this request: {exc}", file=sys.stderr)
        return 1
    except (RocketError, RemotingError, BodyError, OSError, ValueError) as exc:
        print(f"mqadmin {args.command}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
