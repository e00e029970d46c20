"""The chart's RBAC is exactly what the operator uses: every (API group, resource, verb) the chart grants is
one the code calls, and every call the code makes is granted.

The code's uses are read from the source: each call of a `Kube` method (rocketcluster.kube) in
operator/rocketcluster/*.py with its API version and kind, the kinds the operator applies (every child
`render_cluster` makes), the raw requests listed below, and what kopf itself does for the resources it
handles. The chart's grants come from `helm template` in both RBAC modes. A new call without a grant, or a
grant nothing calls, fails the test with the line to add to the chart or to remove from it.
"""

from __future__ import annotations

import ast
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketcluster import names
from rocketcluster.kube import resource_path
from rocketcluster.model import parse_spec
from rocketcluster.render import ClusterRef, render_cluster

yaml = pytest.importorskip("yaml", reason="PyYAML comes with the `operator` extra")

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "operator" / "rocketcluster"
CHART = REPO / "charts" / "rocketcluster-operator"
CACHE = Path(os.environ.get("ROCKETCLUSTER_CACHE", Path.home() / ".cache" / "rocketcluster"))

Use = tuple[str, str, str]  # (API group, resource, verb)

# Kube methods -> the verb the API server checks
_VERBS = {"get": "get", "list": "list", "delete": "delete", "merge_patch": "patch"}

# Calls whose resource is not a literal in the call: (module, method) -> what they touch and why.
RAW_CALLS: dict[tuple[str, str], dict[Use, str]] = {
    ("execute.py", "request"): {
        (names.GROUP, names.PLURAL, "patch"): "clears the manual-rolling-update annotation (merge patch)",
    },
    ("pod_watch.py", "request"): {("", "pods", "list"): "lists the clusters' pods before watching them"},
    ("pod_watch.py", "watch"): {("", "pods", "watch"): "watches the clusters' pods (server-side label selector)"},
    ("handlers_resources.py", "patch_status"): {
        (names.GROUP, f"{names.TOPIC_PLURAL}/status", "patch"): "writes a RocketTopic's status",
        (names.GROUP, f"{names.CONSUMER_GROUP_PLURAL}/status", "patch"): "writes a RocketConsumerGroup's status",
    },
    ("handlers_resources.py", "get"): {
        (names.GROUP, names.TOPIC_PLURAL, "get"): "reads a RocketTopic before its pass",
        (names.GROUP, names.CONSUMER_GROUP_PLURAL, "get"): "reads a RocketConsumerGroup before its pass",
    },
    ("peering.py", "get"): {
        ("kopf.dev", "clusterkopfpeerings", "get"): "reads the replicas' keep-alives (all namespaces)",
        ("kopf.dev", "kopfpeerings", "get"): "reads the replicas' keep-alives (each listed namespace)",
    },
    ("cluster_access.py", "request"): {("", "secrets", "create"): "creates the operator's own credentials Secret"},
    ("controller_access.py", "request"): {("", "secrets", "create"): "creates the controllers' Raft password Secret"},
    ("handlers_users.py", "request"): {("", "secrets", "create"): "creates a RocketUser's credentials Secret"},
    ("handlers_users.py", "apply"): {("", "secrets", "patch"): "writes a new password into an emptied user Secret"},
    ("handlers_users.py", "patch_status"): {
        (names.GROUP, f"{names.USER_PLURAL}/status", "patch"): "writes a RocketUser's status"
    },
    ("handlers_users.py", "get"): {(names.GROUP, names.USER_PLURAL, "get"): "reads a RocketUser before its pass"},
}

# What kopf does itself, with no Kube call in our code.
KOPF_USES: dict[Use, str] = {
    **{
        (names.GROUP, plural, verb): f"kopf {why} the {plural} it handles"
        for plural in (names.PLURAL, names.TOPIC_PLURAL, names.CONSUMER_GROUP_PLURAL, names.USER_PLURAL)
        for verb, why in (("list", "lists"), ("watch", "watches"), ("patch", "patches its annotations onto"))
    },
    ("", "events", "create"): "kopf posts Events about its handlers",
    ("apiextensions.k8s.io", "customresourcedefinitions", "list"): "kopf lists the CRDs to find its resources",
    ("apiextensions.k8s.io", "customresourcedefinitions", "watch"): "kopf notices a CRD that changes",
    ("", "namespaces", "list"): "kopf matches a namespace list against the namespaces (listed mode)",
    ("", "namespaces", "watch"): "kopf notices namespaces that appear (listed mode)",
    **{
        ("kopf.dev", plural, verb): f"kopf's peering (replicaCount > 1) {why} {plural}"
        for plural in ("clusterkopfpeerings", "kopfpeerings")
        for verb, why in (("list", "lists"), ("watch", "watches"), ("patch", "writes its keep-alive into"))
    },
}

# Rights the API server requires for what the operator writes, though no call names them.
IMPLIED_USES: dict[Use, str] = {
    (names.GROUP, f"{names.PLURAL}/finalizers", "update"): "children's ownerReferences set blockOwnerDeletion, "
    "which the OwnerReferencesPermissionEnforcement admission plugin allows only to who may update this",
}


def _group(api_version: str) -> str:
    return api_version.split("/", 1)[0] if "/" in api_version else ""


def _resource(api_version: str, kind: str) -> str:
    return resource_path(api_version, kind, None).rsplit("/", 1)[-1]


def _calls() -> Iterator[tuple[str, int, str, ast.Call]]:
    """(module, line, Kube method, call) of every call on something named *kube* (kube, self.kube,
    kube_client(), handlers.kube_client(), context.kube)."""
    for path in sorted(SOURCE.glob("*.py")):
        if path.name == "kube.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and _is_kube(node.func.value)
                and node.func.attr in (*_VERBS, *_OTHER_METHODS)
            ):
                yield path.name, node.lineno, node.func.attr, node


def _is_kube(receiver: ast.expr) -> bool:
    """`kube`, `self.kube`, `context.kube`, `kube_client()`, `handlers.kube_client()`: a Kube instance."""
    if isinstance(receiver, ast.Call):
        receiver = receiver.func
    name = receiver.id if isinstance(receiver, ast.Name) else getattr(receiver, "attr", "")
    return "kube" in str(name).lower()


_OTHER_METHODS = ("apply", "patch_status", "post_event", "request", "watch")


def _literal(call: ast.Call, index: int) -> str | None:
    """A string literal argument, or a `names.<CONSTANT>` one (resolved)."""
    if len(call.args) <= index:
        return None
    arg = call.args[index]
    value: object = None
    if isinstance(arg, ast.Constant):
        value = arg.value
    elif isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name) and arg.value.id == "names":
        value = getattr(names, arg.attr, None)
    return value if isinstance(value, str) else None


def _applied_kinds() -> set[tuple[str, str]]:
    """(apiVersion, kind) of every child the operator applies, from a spec that turns every optional child on
    (a feature that adds a kind of child turns itself on here)."""
    spec = parse_spec(
        {
            "broker": {"groups": 2},
            "metrics": {"enabled": True},
            "networkPolicy": {"enabled": True},
            "security": {"tls": {"enabled": True, "issuerRef": {"name": "ca"}}},  # a cert-manager Certificate
        }
    )
    return {(o["apiVersion"], o["kind"]) for o in render_cluster(ClusterRef("c", "ns", "uid"), spec, "operators")}


def code_uses() -> dict[Use, list[str]]:
    """What the code calls -> where (module:line, or why)."""
    uses: dict[Use, list[str]] = {}
    unresolved = []

    def add(use: Use, where: str) -> None:
        uses.setdefault(use, []).append(where)

    for module, line, method, call in _calls():
        where = f"{module}:{line} {method}"
        api_version, kind = _literal(call, 0), _literal(call, 1)
        if method in _VERBS and api_version and kind:
            add((_group(api_version), _resource(api_version, kind), _VERBS[method]), where)
        elif (module, method) in RAW_CALLS:
            for use, why in RAW_CALLS[(module, method)].items():
                add(use, f"{where} ({why})")
        elif method == "patch_status" and not any(k.arg == "kind" for k in call.keywords):
            add((names.GROUP, f"{names.PLURAL}/status", "patch"), where)
        elif method == "post_event":
            add(("", "events", "create"), where)
        elif method == "apply":
            for api, applied in sorted(_applied_kinds()):
                # server-side apply: create when the object is missing, patch after
                add((_group(api), _resource(api, applied), "create"), f"{where} ({applied})")
                add((_group(api), _resource(api, applied), "patch"), f"{where} ({applied})")
        else:
            unresolved.append(where)
    assert not unresolved, f"calls whose resource is not a literal: list them in RAW_CALLS: {unresolved}"
    return uses


def _helm() -> Path:
    versions = dict(
        line.split("=", 1) for line in (REPO / "e2e" / "versions.env").read_text().splitlines() if "=" in line
    )
    helm = CACHE / f"helm-{versions['HELM_VERSION'].strip()}" / "bin" / "helm"
    if not helm.exists():
        pytest.skip(f"no helm at {helm}: `make k8s-build` builds it")
    return helm


def chart_grants() -> set[Use]:
    """Every (group, resource, verb) of the chart's Roles and ClusterRoles, in both RBAC modes."""
    granted: set[Use] = set()
    for values in ([], ["--set", "watchNamespaces={team-a}"]):
        out = subprocess.run(
            [str(_helm()), "template", "r", str(CHART), "--kube-version", "1.34.0", *values],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for doc in yaml.safe_load_all(out):
            if doc and doc["kind"] in ("Role", "ClusterRole"):
                for rule in doc["rules"]:
                    granted |= {(g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    return granted


def needed() -> dict[Use, list[str]]:
    uses = code_uses()
    for table in (KOPF_USES, IMPLIED_USES):
        for use, why in table.items():
            uses.setdefault(use, []).append(why)
    return uses


def _line(use: Use) -> str:
    group, resource, verb = use
    return f"apiGroups [{group!r}] resources [{resource!r}] verbs [{verb!r}]"


def test_every_granted_verb_is_used_and_every_used_verb_is_granted() -> None:
    uses, granted = needed(), chart_grants()
    unused = sorted(granted - set(uses))
    missing = sorted(set(uses) - granted)
    assert not unused, "the chart grants what nothing uses (remove it from templates/_helpers.tpl):\n" + "\n".join(
        _line(u) for u in unused
    )
    assert not missing, "the code uses what the chart does not grant:\n" + "\n".join(
        f"{_line(u)}: {'; '.join(uses[u])}" for u in missing
    )


def test_each_use_is_listed_with_where_it_comes_from(capsys: pytest.CaptureFixture[str]) -> None:
    """The table a reviewer reads (pytest -s shows it): each right and the code or kopf behaviour that needs it."""
    uses = needed()
    with capsys.disabled():
        for use in sorted(uses):
            print(f"{'/'.join(x for x in use[:2] if x):45} {use[2]:7} {uses[use][0]}")
    assert all(uses.values())
    # the calls this test reads are really there: the operator's main verbs each come from the source
    code = code_uses()
    for use in [
        ("apps", "statefulsets", "create"),
        ("", "pods", "delete"),
        ("", "pods", "watch"),
        ("", "persistentvolumeclaims", "patch"),
        (names.GROUP, f"{names.PLURAL}/status", "patch"),
        ("storage.k8s.io", "storageclasses", "get"),
    ]:
        assert use in code, use


def test_a_raw_call_listed_here_still_exists() -> None:
    """RAW_CALLS names call sites; one that no longer exists would keep a grant alive for nothing."""
    present = {(module, method) for module, _, method, _ in _calls()}
    stale = [key for key in RAW_CALLS if key not in present and (SOURCE / key[0]).exists()]
    assert not stale, stale


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('await kube.get("v1", "Pod", ns, name)', ("", "pods", "get")),
        ('await self.kube.list("apps/v1", "StatefulSet", ns, sel)', ("apps", "statefulsets", "list")),
        (
            'await handlers.kube_client().delete("policy/v1", "PodDisruptionBudget", ns, n)',
            ("policy", "poddisruptionbudgets", "delete"),
        ),
        ('await kube.merge_patch("v1", "PersistentVolumeClaim", ns, n, p)', ("", "persistentvolumeclaims", "patch")),
    ],
)
def test_the_call_reader(source: str, expected: Use) -> None:
    """The AST reading on single lines: the API version and kind literals give the group, resource and verb."""
    [call] = [
        n
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _VERBS
    ]
    assert isinstance(call.func, ast.Attribute)
    api, kind = _literal(call, 0), _literal(call, 1)
    assert api is not None and kind is not None
    assert (_group(api), _resource(api, kind), _VERBS[call.func.attr]) == expected
