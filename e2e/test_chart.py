"""The operator's Helm chart and the Kubernetes examples against the harness's real API server (control-plane
tier: no pod needs to run).

- `helm lint` passes; `helm template` renders both RBAC modes as designed;
- `helm install --dry-run=server`, and a server-side dry run of every rendered object, succeed;
- invalid values are refused by values.schema.json, naming the value;
- every example in examples/kubernetes applies with `--dry-run=server` once the CRD is installed;
- installed for real with a namespace list, the chart's RBAC is enough for the operator and no more: the
  operator, run as a local process with the chart's ServiceAccount token, builds a cluster, restarts a pod,
  writes status and Events and lets the cluster be deleted, with no request refused; `kubectl auth can-i`
  checks every right it needs and some it must not have; `helm uninstall` keeps the CRD.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml  # type: ignore[import-untyped]  # the `operator` extra, which e2e needs; no stubs

from e2e.operator_harness import CRD_FILE, REPO, OperatorProcess
from rocketcluster.model import parse_spec
from rocketcluster.names import ClusterRef
from rocketcluster.render import render_broker_group

if TYPE_CHECKING:
    from e2e.conftest import Kube

pytestmark = pytest.mark.k8s

CHART = REPO / "charts" / "rocketcluster-operator"
EXAMPLES = sorted((REPO / "examples" / "kubernetes").glob("*.yaml"))
CACHE = Path(os.environ.get("ROCKETCLUSTER_CACHE", Path.home() / ".cache" / "rocketcluster"))


def _versions() -> dict[str, str]:
    """e2e/versions.env: what the harness built (KEY=value lines)."""
    found = {}
    for line in (REPO / "e2e" / "versions.env").read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            found[key.strip()] = value.strip()
    return found


# The harness's helm is built with `go install`, which leaves its default Kubernetes version at v1.20, and
# `helm template` would fail the chart's kubeVersion check; it renders for the harness's version instead.
# (Against a server, as in install, helm asks the server.)
KUBE_VERSION = _versions()["K8S_VERSION"]
# In the RBAC test the chart's Deployment must not start a second operator next to the one the test runs.
NOT_PULLED = [
    "--set",
    "image.repository=rocketcluster.local/not-pulled-by-this-test",
    "--set",
    "image.pullPolicy=Never",
]


def _helm_binary() -> Path:
    return CACHE / f"helm-{_versions()['HELM_VERSION']}" / "bin" / "helm"


class Helm:
    def __init__(self, kube: Kube, home: Path) -> None:
        self.kube = kube
        self.binary = _helm_binary()
        assert self.binary.exists(), f"{self.binary} is missing: `make k8s-build` builds it"
        # helm keeps caches and repository config under these; the test's own directory keeps $HOME clean
        self.env = dict(
            os.environ,
            KUBECONFIG=str(kube.kubeconfig),
            HELM_CACHE_HOME=str(home / "cache"),
            HELM_CONFIG_HOME=str(home / "config"),
            HELM_DATA_HOME=str(home / "data"),
        )

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        p = subprocess.run([str(self.binary), *args], capture_output=True, text=True, env=self.env, timeout=120)
        if check:
            assert p.returncode == 0, f"helm {' '.join(args)} failed ({p.returncode}):\n{p.stderr}"
        return p

    def template(self, *values: str, namespace: str = "ops") -> list[dict[str, Any]]:
        out = self.run("template", "rel", str(CHART), "-n", namespace, "--kube-version", KUBE_VERSION, *values)
        return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


@pytest.fixture(scope="module")
def helm(k8s_control_plane: Kube, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(k8s_control_plane, tmp_path_factory.mktemp("helm"))


@pytest.fixture(scope="module")
def crd(k8s_control_plane: Kube) -> Kube:
    kube = k8s_control_plane
    kube.run("apply", "--server-side", "-f", str(CRD_FILE.parent))  # every CRD: the examples use all three
    for crd_name in ("rocketclusters", "rockettopics", "rocketconsumergroups"):
        kube.wait_established(f"{crd_name}.rocketcluster.io")
    return kube


MakeNamespaces = Callable[[int], list[str]]


@pytest.fixture
def namespaces(k8s_control_plane: Kube) -> Iterator[MakeNamespaces]:
    """`namespaces(n)` creates n fresh namespaces, deleted after the test."""
    made: list[str] = []

    def make(count: int) -> list[str]:
        new = [f"rc-chart-{uuid.uuid4().hex[:6]}" for _ in range(count)]
        for ns in new:
            k8s_control_plane.run("create", "namespace", ns)
        made.extend(new)
        return new

    yield make
    for ns in made:
        k8s_control_plane.run("delete", "namespace", ns, "--wait=false", check=False)


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def operator_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    [deployment] = by_kind(docs, "Deployment")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return dict(container)


def granted(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}


# What the operator does in a namespace it manages (see rocketcluster.handlers and rocketcluster.kube).
NAMESPACED_NEEDS = {
    ("rocketcluster.io", "rocketclusters", v) for v in ("get", "list", "watch", "patch")
} | {
    ("rocketcluster.io", "rocketclusters/status", "patch"),
} | {
    # RocketTopic, RocketConsumerGroup (handlers_resources): kopf lists and watches them, and patches its
    # finalizer on and off those with deletionPolicy Delete; each pass of the operator gets one
    ("rocketcluster.io", resource, verb)
    for resource in ("rockettopics", "rocketconsumergroups")
    for verb in ("get", "list", "watch", "patch")
} | {
    ("rocketcluster.io", "rockettopics/status", "patch"),  # the status of each topic and group
    ("rocketcluster.io", "rocketconsumergroups/status", "patch"),
    ("", "events", "create"),
    ("", "pods", "list"),
    ("", "pods", "watch"),
    ("", "pods", "delete"),
    ("", "persistentvolumeclaims", "list"),
    ("", "persistentvolumeclaims", "patch"),  # growing the volumes (plan_storage)
    ("", "persistentvolumeclaims", "delete"),
} | {
    (group, resource, verb)
    for group, resource, verbs in [
        ("apps", "statefulsets", ("get", "list", "delete")),
        ("", "services", ()),
        ("", "configmaps", ("delete",)),
        ("", "serviceaccounts", ()),
        ("policy", "poddisruptionbudgets", ("delete",)),
        ("networking.k8s.io", "networkpolicies", ("delete",)),
    ]
    for verb in ("create", "patch", *verbs)  # server-side apply creates, then patches
}  # fmt: skip
# spec.security: the operator reads the Secrets a cluster names and creates its own; it never lists them.
SECRET_VERBS = ("get", "create", "patch")
# Rights the chart no longer grants because nothing uses them (tests/operator/test_rbac.py keeps it so).
NAMESPACED_UNUSED = {
    ("", "serviceaccounts", "list"),
    ("", "configmaps", "get"),
    ("", "pods", "get"),
    ("rocketcluster.io", "rocketclusters/status", "get"),
}
# Cluster-scoped kinds stay in the ClusterRole even when the operator watches listed namespaces (nodes: with
# spec.failover it reads the node each broker pod is bound to, to fence a master on a lost node).
CLUSTER_SCOPED = {"storageclasses", "customresourcedefinitions", "namespaces", "nodes"}


# -- lint and render ---------------------------------------------------------------------------------------------


def test_helm_lint_passes_in_both_modes(helm: Helm) -> None:
    for values in ([], ["--set", "watchNamespaces={team-a,team-b}", "--set", "logLevel=debug"]):
        out = helm.run("lint", "--strict", str(CHART), *values)
        assert "0 chart(s) failed" in out.stdout, out.stdout


def test_template_for_all_namespaces_uses_one_cluster_role(helm: Helm) -> None:
    docs = helm.template()
    kinds = sorted(d["kind"] for d in docs)
    # the Pod is `helm test`'s (templates/tests), the Service the operator's /healthz for it
    assert kinds == [
        "ClusterKopfPeering",
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "Pod",
        "Service",
        "ServiceAccount",
    ]
    [test_pod] = by_kind(docs, "Pod")
    assert test_pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    assert test_pod["spec"]["automountServiceAccountToken"] is False
    assert test_pod["spec"]["containers"][0]["securityContext"] == RESTRICTED_CONTAINER
    [health] = by_kind(docs, "Service")
    assert {p["name"] for p in health["spec"]["ports"]} == {"healthz", "metrics"}
    [role] = by_kind(docs, "ClusterRole")
    rights = granted(role["rules"])
    assert rights >= NAMESPACED_NEEDS
    assert ("storage.k8s.io", "storageclasses", "get") in rights
    assert ("", "nodes", "get") in rights
    assert not any(
        (r == "secrets" and v not in SECRET_VERBS) or v in ("*", "escalate", "bind", "impersonate")
        for _, r, v in rights
    ), rights
    [binding] = by_kind(docs, "ClusterRoleBinding")
    [account] = by_kind(docs, "ServiceAccount")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": "ops"}]

    container = operator_container(docs)
    assert container["command"] == ["rocketcluster-operator"]
    assert "--all-namespaces" in container["args"] and "--peering=rel-rocketcluster-operator-ops" in container["args"]
    assert not [a for a in container["args"] if a.startswith("--namespace")]
    assert container["image"] == "rocketcluster.local/operator:0.1.0"


def test_template_for_listed_namespaces_uses_a_role_in_each(helm: Helm) -> None:
    docs = helm.template("--set", "watchNamespaces={team-a,team-b}")
    roles = by_kind(docs, "Role")
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["team-a", "team-b"]
    for role in roles:
        assert granted(role["rules"]) >= NAMESPACED_NEEDS
    bindings = by_kind(docs, "RoleBinding")
    assert sorted((b["metadata"]["namespace"], b["roleRef"]["kind"]) for b in bindings) == [
        ("team-a", "Role"),
        ("team-b", "Role"),
    ]
    # the one ClusterRole holds only cluster-scoped reads
    [cluster_role] = by_kind(docs, "ClusterRole")
    rights = granted(cluster_role["rules"])
    assert {r for _, r, _ in rights} <= CLUSTER_SCOPED, rights
    assert {v for _, _, v in rights} <= {"get", "list", "watch"}, rights
    assert ("storage.k8s.io", "storageclasses", "get") in rights

    args = operator_container(docs)["args"]
    assert [a for a in args if a.startswith("--namespace")] == ["--namespace=team-a", "--namespace=team-b"]
    assert "--all-namespaces" not in args


def test_the_deployment_runs_locked_down(helm: Helm) -> None:
    docs = helm.template()
    [deployment] = by_kind(docs, "Deployment")
    spec = deployment["spec"]
    # two replicas by default, one active (kopf's peering)
    assert spec["replicas"] == 2 and spec["strategy"]["type"] == "RollingUpdate"
    pod = spec["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    container = operator_container(docs)
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    assert {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}} in pod["volumes"]
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "healthz"}, probe
    assert {"name": "healthz", "containerPort": 8080, "protocol": "TCP"} in container["ports"]
    assert "--liveness=http://0.0.0.0:8080/healthz" in container["args"]
    assert container["resources"]["limits"]["memory"] and container["imagePullPolicy"] == "IfNotPresent"
    for doc in docs:
        labels = doc["metadata"]["labels"]
        assert labels["app.kubernetes.io/managed-by"] == "Helm", doc["kind"]
        assert labels["helm.sh/chart"] == "rocketcluster-operator-0.1.0", doc["kind"]
        assert labels["app.kubernetes.io/name"] == "rocketcluster-operator", doc["kind"]


@pytest.mark.parametrize(
    ("values", "replicas", "strategy", "flag", "peering"),
    [
        ([], 2, "RollingUpdate", "--peering=rel-rocketcluster-operator-ops", ("ClusterKopfPeering", None)),
        (
            ["--set", "watchNamespaces={team-a,team-b}"],
            2,
            "RollingUpdate",
            "--peering=rel-rocketcluster-operator",
            ("KopfPeering", ["team-a", "team-b"]),
        ),
        (["--set", "replicaCount=3"], 3, "RollingUpdate", "--peering=rel-rocketcluster-operator-ops", None),
        (["--set", "replicaCount=1"], 1, "Recreate", "--standalone", None),
    ],
    ids=["default", "listed-namespaces", "three", "standalone"],
)
def test_replicas_run_with_kopf_peering_or_standalone(
    helm: Helm, values: list[str], replicas: int, strategy: str, flag: str, peering: Any
) -> None:
    docs = helm.template(*values)
    [deployment] = by_kind(docs, "Deployment")
    assert deployment["spec"]["replicas"] == replicas
    assert deployment["spec"]["strategy"]["type"] == strategy
    container = operator_container(docs)
    other = "--standalone" if flag.startswith("--peering") else "--peering"
    assert flag in container["args"] and not any(a.startswith(other) for a in container["args"])
    pod_id = {"name": "POD_ID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    assert pod_id in container["env"], "kopf names each replica by POD_ID in the peering object"
    objects = by_kind(docs, "ClusterKopfPeering") + by_kind(docs, "KopfPeering")
    rules = [r for d in by_kind(docs, "Role") + by_kind(docs, "ClusterRole") for r in d["rules"]]
    peering_rules = [r for r in rules if r["apiGroups"] == ["kopf.dev"]]
    if replicas == 1:
        assert not objects and not peering_rules, "a standalone operator needs no peering object nor rights"
        return
    name = flag.split("=", 1)[1]
    assert {o["metadata"]["name"] for o in objects} == {name}
    if peering is not None:
        kind, namespaces = peering
        assert {o["kind"] for o in objects} == {kind}
        assert sorted(o["metadata"].get("namespace") for o in objects) == (namespaces or [None])
        plural = "kopfpeerings" if namespaces else "clusterkopfpeerings"
        assert all(r["resources"] == [plural] for r in peering_rules) and peering_rules
        assert all(r["verbs"] == ["get", "list", "watch", "patch"] for r in peering_rules)


@pytest.mark.parametrize(
    ("values", "flags"),
    [
        (["--set", "logLevel=debug", "--set", "logFormat=json"], ["--log-format=json", "--verbose"]),
        (["--set", "logLevel=warning", "--set", "logFormat=plain"], ["--log-format=plain", "--quiet"]),
        ([], ["--log-format=full"]),
    ],
)
def test_log_values_become_kopf_flags(helm: Helm, values: list[str], flags: list[str]) -> None:
    args = operator_container(helm.template(*values))["args"]
    logging_args = [a for a in args if a.startswith("--log-format") or a in ("--verbose", "--quiet", "--debug")]
    assert logging_args == flags


def test_pod_placement_values_reach_the_pod(helm: Helm) -> None:
    docs = helm.template(
        "--set", "nodeSelector.role=ops",
        "--set", "podAnnotations.team=messaging",
        "--set", "tolerations[0].key=dedicated,tolerations[0].operator=Exists",
        "--set", "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
                 ".matchExpressions[0].key=zone",
        "--set", "serviceAccount.create=false,serviceAccount.name=existing",
    )  # fmt: skip
    [deployment] = by_kind(docs, "Deployment")
    template = deployment["spec"]["template"]
    assert template["metadata"]["annotations"]["team"] == "messaging"
    pod = template["spec"]
    assert pod["nodeSelector"] == {"role": "ops"}
    assert pod["tolerations"] == [{"key": "dedicated", "operator": "Exists"}]
    assert "nodeAffinity" in pod["affinity"]
    assert pod["serviceAccountName"] == "existing" and not by_kind(docs, "ServiceAccount")
    [binding] = by_kind(docs, "ClusterRoleBinding")
    assert binding["subjects"][0]["name"] == "existing"


RUNTIME_DEFAULT = {"type": "RuntimeDefault"}
RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "privileged": False,
    "capabilities": {"drop": ["ALL"]},
}


@pytest.mark.parametrize(
    ("values", "pod_context", "container_context"),
    [
        (
            [],
            {"runAsNonRoot": True, "runAsUser": 10002, "runAsGroup": 10002, "seccompProfile": RUNTIME_DEFAULT},
            RESTRICTED_CONTAINER,
        ),
        # OpenShift's restricted SCC assigns the ids
        (
            ["--set", "fixedUserIds=false"],
            {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            RESTRICTED_CONTAINER,
        ),
        # fixedUserIds false also drops ids set in the values
        (
            ["--set", "fixedUserIds=false", "--set", "podSecurityContext.fsGroup=3000"],
            {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            RESTRICTED_CONTAINER,
        ),
        # a field changed, one added, one removed with null
        (
            [
                "--set", "podSecurityContext.runAsUser=4000",
                "--set", "podSecurityContext.fsGroupChangePolicy=OnRootMismatch",
                "--set", "podSecurityContext.runAsGroup=null",
                "--set", "containerSecurityContext.privileged=null",
                "--set", "containerSecurityContext.seLinuxOptions.level=s0:c1",
            ],
            {
                "runAsNonRoot": True,
                "runAsUser": 4000,
                "fsGroupChangePolicy": "OnRootMismatch",
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            {
                "allowPrivilegeEscalation": False,
                "readOnlyRootFilesystem": True,
                "capabilities": {"drop": ["ALL"]},
                "seLinuxOptions": {"level": "s0:c1"},
            },
        ),
    ],
    ids=["default", "no-fixed-ids", "no-fixed-ids-wins", "overrides"],
)  # fmt: skip
def test_security_context_values_reach_the_pod(
    helm: Helm, values: list[str], pod_context: dict[str, Any], container_context: dict[str, Any]
) -> None:
    docs = helm.template(*values)
    [deployment] = by_kind(docs, "Deployment")
    assert deployment["spec"]["template"]["spec"]["securityContext"] == pod_context
    assert operator_container(docs)["securityContext"] == container_context


SCRAPE = {"prometheus.io/scrape": "true", "prometheus.io/port": "8081", "prometheus.io/path": "/metrics"}


@pytest.mark.parametrize(
    ("values", "port_env", "annotations"),
    [
        ([], "8081", SCRAPE),
        (["--set", "metrics.port=9300"], "9300", SCRAPE | {"prometheus.io/port": "9300"}),
        (["--set", "metrics.enabled=false"], "0", {}),
        (["--set", "podAnnotations.team=mq"], "8081", SCRAPE | {"team": "mq"}),
    ],
)
def test_the_operator_metrics_port_and_scrape_annotations(
    helm: Helm, values: list[str], port_env: str, annotations: dict[str, str]
) -> None:
    docs = helm.template(*values)
    container = operator_container(docs)
    assert {"name": "ROCKETCLUSTER_METRICS_PORT", "value": port_env} in container["env"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports.get("metrics") == (int(port_env) or None)
    [deployment] = by_kind(docs, "Deployment")
    assert deployment["spec"]["template"]["metadata"].get("annotations", {}) == annotations


def test_monitors_are_rendered_only_when_asked_and_the_prometheus_operator_is_there(helm: Helm) -> None:
    asked = ["--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.serviceMonitor.labels.release=kps"]
    assert not by_kind(helm.template(*asked), "ServiceMonitor"), "no monitoring.coreos.com/v1: no ServiceMonitor"
    assert not by_kind(helm.template("--api-versions", "monitoring.coreos.com/v1"), "ServiceMonitor")
    docs = helm.template(*asked, "--api-versions", "monitoring.coreos.com/v1")
    [monitor], [pod_monitor], [service] = (
        by_kind(docs, "ServiceMonitor"),
        by_kind(docs, "PodMonitor"),
        [d for d in by_kind(docs, "Service") if d["metadata"]["name"].endswith("-metrics")],
    )
    [endpoint] = monitor["spec"]["endpoints"]
    assert monitor["metadata"]["labels"]["release"] == "kps" and endpoint["port"] == "metrics"
    assert endpoint["honorLabels"] is True  # else Prometheus renames the clusters' namespace label
    [deployment] = by_kind(docs, "Deployment")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    # the broker pods the operator renders with spec.metrics.enabled: their labels and port name
    spec = parse_spec({"metrics": {"enabled": True}})
    broker = next(o for o in render_broker_group(ClusterRef("c", "ns", "uid"), spec, 0) if o["kind"] == "StatefulSet")
    broker_pod = broker["spec"]["template"]
    selector = pod_monitor["spec"]["selector"]
    assert selector["matchLabels"].items() <= broker_pod["metadata"]["labels"].items()
    [components] = selector["matchExpressions"]
    assert components["operator"] == "In" and set(components["values"]) == {"broker", "nameserver"}
    assert pod_monitor["spec"]["podMetricsEndpoints"][0]["port"] in [
        p["name"] for p in broker_pod["spec"]["containers"][0]["ports"]
    ]
    assert pod_monitor["spec"]["namespaceSelector"] == {"any": True}
    listed = helm.template(*asked, "--api-versions", "monitoring.coreos.com/v1", "--set", "watchNamespaces={a,b}")
    assert by_kind(listed, "PodMonitor")[0]["spec"]["namespaceSelector"] == {"matchNames": ["a", "b"]}


# -- values.schema.json ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        ("watchNamespaces=notalist", "/watchNamespaces"),
        ("image.tag=5", "/image/tag"),
        ("unknownKey=1", "'unknownKey'"),
        ("logLevel=loud", "/logLevel"),
        ("logFormat=xml", "/logFormat"),
        ("image.pullPolicy=Sometimes", "/image/pullPolicy"),
        ("watchNamespaces={Team_A}", "/watchNamespaces/0"),
        ("resources.limits.memory=lots", "/resources/limits/memory"),
        ("serviceAccount.create=false", "/serviceAccount/name"),
        ("image.repo=x", "'repo'"),
        ("metrics.port=8080", "/metrics/port"),
        ("metrics.port=http", "/metrics/port"),
        ("metrics.serviceMonitor.interval=often", "/metrics/serviceMonitor/interval"),
        ("grafanaDashboard.enabled=maybe", "/grafanaDashboard/enabled"),
        ("fixedUserIds=no", "/fixedUserIds"),
        ("podSecurityContext=root", "/podSecurityContext"),
        ("containerSecurityContext={a,b}", "/containerSecurityContext"),
    ],
)
def test_invalid_values_are_refused_naming_the_value(helm: Helm, setting: str, named: str) -> None:
    out = helm.run("template", "rel", str(CHART), "--kube-version", KUBE_VERSION, "--set", setting, check=False)
    assert out.returncode != 0, f"{setting} was accepted"
    assert "values don't meet the specifications of the schema" in out.stderr, out.stderr
    assert named in out.stderr, out.stderr


def test_an_install_with_invalid_values_is_refused_before_anything_is_created(helm: Helm) -> None:
    out = helm.run("install", "refused", str(CHART), "-n", "default", "--set", "watchNamespaces=notalist", check=False)
    assert out.returncode != 0 and "/watchNamespaces" in out.stderr, out.stderr
    assert helm.run("status", "refused", "-n", "default", check=False).returncode != 0, "a release was recorded"


# -- against the API server ----------------------------------------------------------------------------------------


def test_install_dry_run_server_and_a_server_side_dry_run_of_every_object(
    helm: Helm, crd: Kube, namespaces: MakeNamespaces
) -> None:
    ops, team_a, team_b = namespaces(3)
    for values in ([], ["--set", f"watchNamespaces={{{team_a},{team_b}}}"]):
        out = helm.run("install", "dry", str(CHART), "-n", ops, "--dry-run=server", *values)
        assert "STATUS: pending-install" in out.stdout, out.stdout
        assert "kubectl get rmq" in out.stdout, "NOTES.txt tells how to watch the first cluster"
        first_cluster = re.search(r"<<'EOF'\n(.*?)\nEOF\n", out.stdout, flags=re.DOTALL)
        assert first_cluster is not None, out.stdout
        manifest = first_cluster.group(1)
        assert len(manifest.splitlines()) == 5, manifest
        crd.run("apply", "-n", team_a, "--dry-run=server", "--validate=strict", "-f", "-", input=manifest)
        # helm's dry run renders and checks kinds against the server's discovery; the API server itself
        # validates each object (schema, defaults, admission) only in a server-side dry run
        rendered = helm.run("template", "dry", str(CHART), "-n", ops, "--kube-version", KUBE_VERSION, *values).stdout
        # the objects name their namespaces (the release's, and each watched one for Roles)
        applied = crd.run("apply", "--dry-run=server", "--validate=strict", "-f", "-", input=rendered)
        assert "deployment.apps/dry-rocketcluster-operator created (server dry run)" in applied, applied


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_an_example_applies_with_a_server_side_dry_run(crd: Kube, namespaces: MakeNamespaces, example: Path) -> None:
    [ns] = namespaces(1)
    out = crd.run("apply", "-n", ns, "--dry-run=server", "--validate=strict", "-f", str(example))
    assert "(server dry run)" in out and "error" not in out.lower(), out


def _service_account_kubeconfig(kube: Kube, namespace: str, account: str, path: Path) -> Path:
    """A kubeconfig that authenticates as the ServiceAccount (a token from the TokenRequest API)."""
    token = kube.run("create", "token", account, "-n", namespace, "--duration=1h").strip()
    admin = json.loads(kube.run("config", "view", "--raw", "--minify", "-o", "json"))
    cluster = admin["clusters"][0]["cluster"]
    if "certificate-authority" in cluster:  # inline the CA so the file stands alone
        ca = Path(cluster.pop("certificate-authority")).read_bytes()
        cluster["certificate-authority-data"] = base64.b64encode(ca).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "harness", "cluster": cluster}],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "harness", "user": account, "namespace": namespace}}],
        "current-context": "sa",
    }
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    return path


def _can(kube: Kube, subject: str, verb: str, resource: str, namespace: str | None) -> bool:
    """`kubectl auth can-i` as `subject`; `resource` may name a subresource (rocketclusters.x.io/status)."""
    name, _, subresource = resource.partition("/")
    where = ["-n", namespace] if namespace else []
    sub = ["--subresource", subresource] if subresource else []
    out = kube.run("auth", "can-i", verb, name, *sub, *where, f"--as={subject}", check=False)
    return out.strip() == "yes"


def _assert_can_run_clusters_in(kube: Kube, subject: str, namespace: str) -> None:
    for group, resource, verb in sorted(NAMESPACED_NEEDS):
        name, _, subresource = resource.partition("/")
        qualified = f"{name}.{group}" if group else name
        assert _can(kube, subject, verb, "/".join(filter(None, [qualified, subresource])), namespace), (
            f"{subject} cannot {verb} {resource} in {namespace}"
        )


def test_the_chart_rbac_is_enough_for_the_operator_and_no_more(
    helm: Helm, crd: Kube, namespaces: MakeNamespaces, tmp_path: Path
) -> None:
    kube = crd
    ops, watched, other = namespaces(3)
    helm.run("install", "rbac", str(CHART), "-n", ops, "--set", f"watchNamespaces={{{watched}}}", *NOT_PULLED)
    try:
        account = "rbac-rocketcluster-operator"
        subject = f"system:serviceaccount:{ops}:{account}"
        _assert_can_run_clusters_in(kube, subject, watched)
        assert _can(kube, subject, "get", "storageclasses.storage.k8s.io", None)
        refused = [
            ("list", "rocketclusters.rocketcluster.io", other),  # a namespace it does not watch
            ("delete", "pods", other),
            ("list", "secrets", watched),  # only the Secrets it names (spec.security), never all of them
            ("create", "pods", watched),  # pods come from StatefulSets
            ("create", "roles.rbac.authorization.k8s.io", watched),
            ("delete", "storageclasses.storage.k8s.io", None),
            ("create", "customresourcedefinitions.apiextensions.k8s.io", None),
            *((verb, f"{r}.{g}" if g else r, watched) for g, r, verb in NAMESPACED_UNUSED if "/" not in r),
        ]
        for verb, resource, namespace in refused:
            assert not _can(kube, subject, verb, resource, namespace), f"{verb} {resource} in {namespace}"

        _run_operator_as(kube, _service_account_kubeconfig(kube, ops, account, tmp_path / "sa.kubeconfig"), watched)
    finally:
        helm.run("uninstall", "rbac", "-n", ops, "--wait", "--timeout", "60s")
    # Helm never deletes what it installed from crds/
    kube.run("get", "crd", "rocketclusters.rocketcluster.io")


def _run_operator_as(kube: Kube, kubeconfig: Path, namespace: str) -> None:
    """The operator with only the chart's rights: create a cluster, roll a pod, delete the cluster."""
    log = kubeconfig.parent / "operator.log"
    operator = OperatorProcess(kubeconfig, [namespace], log)
    operator.start()
    try:
        cluster = yaml.safe_load((REPO / "examples" / "kubernetes" / "minimal.yaml").read_text())
        # Pods stay Pending here (nothing schedules them on purpose): the test is about the operator's rights.
        cluster["spec"]["template"] = {"nodeSelector": {"rocketcluster.io/e2e": "nowhere"}}
        kube.apply(json.dumps(cluster), namespace=namespace)

        def children() -> bool:
            out = kube.run("get", "-n", namespace, "sts,svc,cm,pdb,sa", "-l", "rocketcluster.io/cluster=minimal",
                           "-o", "name")  # fmt: skip
            return {
                "statefulset.apps/minimal-broker-0",
                "statefulset.apps/minimal-nameserver",
                "configmap/minimal-connection",
                "poddisruptionbudget.policy/minimal-broker-0",
                "serviceaccount/minimal-rocketmq",
                "service/minimal-broker",
            } <= set(out.split())

        kube.wait_for("the operator to build the cluster's children", children, timeout=60)

        def status() -> dict[str, Any] | None:
            obj = kube.get("-n", namespace, "rmq", "minimal")
            done = (obj.get("status") or {}).get("observedGeneration") == obj["metadata"]["generation"]
            return obj if done else None

        kube.wait_for("status written through rocketclusters/status", status, timeout=60)

        def pods() -> dict[str, str]:
            items = kube.get("-n", namespace, "pod", "-l", "rocketcluster.io/cluster=minimal")["items"]
            return {p["metadata"]["name"]: p["metadata"]["uid"] for p in items}

        before = kube.wait_for("the StatefulSets' pods", lambda: (found := pods()) and len(found) == 3 and found)
        kube.run("patch", "-n", namespace, "rmq", "minimal", "--type=merge",
                 "-p", '{"spec": {"image": "rocketcluster.local/broker:0.1.1"}}')  # fmt: skip
        kube.wait_for(
            "a pod restarted by the roll (deleted by the operator, recreated by its StatefulSet)",
            lambda: any(uid != before.get(name) for name, uid in pods().items()),
            timeout=60,
        )
        events = kube.get("-n", namespace, "events", "--field-selector", "involvedObject.name=minimal")["items"]
        assert any(e["reason"] == "CREATE" for e in events), [e["reason"] for e in events]

        # kopf removes its finalizer (a patch) once the operator sees the deletion
        kube.run("delete", "-n", namespace, "rmq", "minimal", "--wait=true", "--timeout=45s")
    finally:
        text = operator.stop()
    for refused in ("Forbidden", "forbidden", "Not enough permissions", "Failed to post an event", "Traceback"):
        assert refused not in text, f"{refused!r} in the operator's log:\n{text[-6000:]}"


def test_the_cluster_wide_rbac_covers_every_namespace_and_no_more(
    helm: Helm, crd: Kube, namespaces: MakeNamespaces
) -> None:
    """Installed for all namespaces, the same rights hold in any namespace, including one made afterwards.
    (No operator runs here: in every namespace it would reconcile the other tests' clusters.)"""
    kube = crd
    [ops] = namespaces(1)
    helm.run("install", "wide", str(CHART), "-n", ops, *NOT_PULLED)
    try:
        [later] = namespaces(1)
        subject = f"system:serviceaccount:{ops}:wide-rocketcluster-operator"
        _assert_can_run_clusters_in(kube, subject, later)
        assert _can(kube, subject, "get", "storageclasses.storage.k8s.io", None)
        assert _can(kube, subject, "watch", "customresourcedefinitions.apiextensions.k8s.io", None)
        for verb, resource in [("list", "secrets"), ("create", "pods"), ("update", "statefulsets.apps")]:
            assert not _can(kube, subject, verb, resource, later), f"{verb} {resource}"
        assert not _can(kube, subject, "list", "namespaces", None), "all-namespaces mode needs no namespace list"
    finally:
        helm.run("uninstall", "wide", "-n", ops, "--wait", "--timeout", "60s")
