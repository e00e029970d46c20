"""`rocketcluster-operator`: `kopf run` with the handlers of RocketCluster (rocketcluster.handlers) and of
RocketTopic and RocketConsumerGroup (rocketcluster.handlers_resources) and of RocketUser
(rocketcluster.handlers_users) loaded, and kopf's own flags.

    rocketcluster-operator --standalone --all-namespaces --liveness=http://0.0.0.0:8080/healthz
    rocketcluster-operator --namespace team-a --namespace team-b      # only these namespaces
    rocketcluster-operator --peering=rocketcluster --priority=100      # active/standby replicas

Every flag is kopf's (`kopf run --help`); this script only names the modules, so users never type a path.
Without a flag that chooses namespaces it watches all of them, as the Helm chart's default does.
"""

from __future__ import annotations

import os
import sys

from kopf import cli

from rocketcluster.peering import own_identity

__all__ = ["kopf_arguments", "main", "watched_namespaces"]

_NAMESPACE_FLAGS = ("-n", "--namespace", "-A", "--all-namespaces")


def kopf_arguments(argv: list[str]) -> list[str]:
    """The `kopf run` command line for our arguments (pure: tested by a table)."""
    args = ["run", "--module", "rocketcluster.handlers", "--module", "rocketcluster.handlers_resources"]
    args += ["--module", "rocketcluster.handlers_users"]
    chooses_namespaces = any(a in _NAMESPACE_FLAGS or a.startswith(("--namespace=", "-n=")) for a in argv)
    if not chooses_namespaces:
        args.append("--all-namespaces")
    return args + argv


def watched_namespaces(argv: list[str]) -> list[str] | None:
    """The namespaces (or kopf patterns) our arguments name; None when they name none or all of them."""
    found: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg in ("-A", "--all-namespaces"):
            return None
        if arg in ("-n", "--namespace"):
            found.append(next(args, ""))
        elif arg.startswith(("--namespace=", "-n=")):
            found.append(arg.split("=", 1)[1])
    return [ns for ns in found if ns] or None


def main(argv: list[str] | None = None) -> None:
    # kopf names this replica in the peering objects by POD_ID; rocketcluster.peering must know the same name
    os.environ.setdefault("POD_ID", own_identity())
    cli.main(args=kopf_arguments(sys.argv[1:] if argv is None else argv), prog_name="rocketcluster-operator")
