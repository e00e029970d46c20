"""Pod template extras (rocketcluster.pod_extras): env, volumes, volumeMounts, initContainers and sidecars
reach the pods after the operator's own entries; the operator's names are refused; security contexts merge
over the restricted defaults, and fixedUserIds: false leaves the ids to the platform.
tests/operator/test_crd_apiserver.py sends the same hostile specs to a real API server."""

from __future__ import annotations

from typing import Any

import pytest

from rocketcluster import names
from rocketcluster.model import SpecError, parse_spec
from rocketcluster.pod_extras import (
    MAX_EXTRAS,
    RESERVED_CONTAINERS,
    RESERVED_ENV,
    RESERVED_MOUNT_PATHS,
    RESERVED_VOLUMES,
    reserved_mount_path,
)
from rocketcluster.render import ClusterRef, render_cluster

CLUSTER = ClusterRef(name="demo", namespace="mq", uid="uid-1")
RESTRICTED = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "readOnlyRootFilesystem": True}


def _pods(raw: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The pod spec of each StatefulSet: 'nameserver' and 'broker' (group 0)."""
    objects = render_cluster(CLUSTER, parse_spec(raw))
    sets = {o["metadata"]["name"]: o for o in objects if o["kind"] == "StatefulSet"}
    return {
        "nameserver": sets[names.nameserver_statefulset("demo")]["spec"]["template"]["spec"],
        "broker": sets[names.broker_statefulset("demo", 0)]["spec"]["template"]["spec"],
    }


def _main(pod: dict[str, Any]) -> dict[str, Any]:
    return dict(pod["containers"][0])


# -- what reaches the pods -----------------------------------------------------------------------------------------

ENV = [{"name": "TZ", "value": "UTC"}, {"name": "SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]
VOLUME = {"name": "certs", "secret": {"secretName": "mq-certs"}}
MOUNT = {"name": "certs", "mountPath": "/etc/certs", "readOnly": True}
SIDECAR = {"name": "log-shipper", "image": "fluent-bit:3", "args": ["-c", "/x"]}
INIT = {"name": "wait", "image": "busybox:1", "command": ["true"], "securityContext": {"runAsUser": 20000}}


@pytest.mark.parametrize(
    ("raw", "component", "env", "volumes", "mounts", "init", "sidecars"),
    [
        # cluster-wide: both components get it
        ({"template": {"env": ENV}}, "nameserver", ENV, [], [], [], []),
        ({"template": {"env": ENV}}, "broker", ENV, [], [], [], []),
        # one component's template: only that one
        (
            {"broker": {"template": {"volumes": [VOLUME], "volumeMounts": [MOUNT]}}},
            "broker",
            [],
            [VOLUME],
            [MOUNT],
            [],
            [],
        ),
        ({"broker": {"template": {"volumes": [VOLUME], "volumeMounts": [MOUNT]}}}, "nameserver", [], [], [], [], []),
        ({"nameServer": {"template": {"sidecars": [SIDECAR]}}}, "nameserver", [], [], [], [], [SIDECAR]),
        ({"nameServer": {"template": {"initContainers": [INIT]}}}, "nameserver", [], [], [], [INIT], []),
        # a component's list replaces the cluster-wide one, as other template fields do
        (
            {"template": {"env": ENV}, "broker": {"template": {"env": [{"name": "ONLY", "value": "me"}]}}},
            "broker",
            [{"name": "ONLY", "value": "me"}],
            [],
            [],
            [],
            [],
        ),
    ],
)
def test_extras_reach_the_pod_after_the_operators_own(
    raw: dict[str, Any],
    component: str,
    env: list[Any],
    volumes: list[Any],
    mounts: list[Any],
    init: list[Any],
    sidecars: list[Any],
) -> None:
    bare = _pods({})[component]
    pod = _pods(raw)[component]
    main, bare_main = _main(pod), _main(bare)
    assert main.get("env", []) == bare_main.get("env", []) + env
    assert main["volumeMounts"] == bare_main["volumeMounts"] + mounts
    assert pod["volumes"] == bare["volumes"] + volumes
    assert [c["name"] for c in pod.get("initContainers", [])] == [c["name"] for c in init]
    assert [c["name"] for c in pod["containers"]] == [main["name"]] + [c["name"] for c in sidecars]
    # everything but the security context passes through as written
    for given, made in zip(init + sidecars, pod.get("initContainers", []) + pod["containers"][1:], strict=True):
        assert {k: v for k, v in made.items() if k != "securityContext"} == {
            k: v for k, v in given.items() if k != "securityContext"
        }


def test_extra_containers_get_the_restricted_context_under_their_own() -> None:
    pod = _pods({"broker": {"template": {"initContainers": [INIT], "sidecars": [SIDECAR]}}})["broker"]
    assert pod["containers"][1]["securityContext"] == RESTRICTED, "a sidecar without one gets the main container's"
    assert pod["initContainers"][0]["securityContext"] == {**RESTRICTED, "runAsUser": 20000}, "its own fields win"


def test_a_container_security_context_override_reaches_the_extra_containers_too() -> None:
    raw = {"template": {"containerSecurityContext": {"readOnlyRootFilesystem": False}, "sidecars": [SIDECAR]}}
    pod = _pods(raw)["broker"]
    assert pod["containers"][0]["securityContext"] == {**RESTRICTED, "readOnlyRootFilesystem": False}
    assert pod["containers"][1]["securityContext"] == {**RESTRICTED, "readOnlyRootFilesystem": False}


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        (
            {},
            {
                "runAsNonRoot": True,
                "runAsUser": 10001,
                "runAsGroup": 10001,
                "fsGroup": 10001,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
        ),
        ({"fixedUserIds": True}, None),  # the same as the default
        ({"fixedUserIds": False}, {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}),
        (
            {"fixedUserIds": False, "securityContext": {"fsGroupChangePolicy": "OnRootMismatch"}},
            {
                "runAsNonRoot": True,
                "seccompProfile": {"type": "RuntimeDefault"},
                "fsGroupChangePolicy": "OnRootMismatch",
            },
        ),
        (
            {"securityContext": {"runAsUser": 4000, "seccompProfile": {"type": "Localhost", "localhostProfile": "p"}}},
            {
                "runAsNonRoot": True,
                "runAsUser": 4000,
                "runAsGroup": 10001,
                "fsGroup": 10001,
                "seccompProfile": {"type": "Localhost", "localhostProfile": "p"},
            },
        ),
    ],
)
def test_pod_security_context_overrides_and_fixed_ids(template: dict[str, Any], expected: Any) -> None:
    default = _pods({})["broker"]["securityContext"]
    for component in ("nameserver", "broker"):
        assert _pods({"template": template})[component]["securityContext"] == (expected or default)


def test_fixed_user_ids_false_on_one_component_only() -> None:
    pods = _pods({"broker": {"template": {"fixedUserIds": False}}})
    assert "runAsUser" not in pods["broker"]["securityContext"]
    assert pods["nameserver"]["securityContext"]["runAsUser"] == 10001


def test_an_unset_field_adds_nothing() -> None:
    for pod in _pods({}).values():
        assert "initContainers" not in pod
        assert len(pod["containers"]) == 1


def test_extras_change_the_pod_template_so_the_pods_roll() -> None:
    before = _pods({})
    after = _pods({"template": {"env": ENV}})
    assert before["broker"] != after["broker"] and before["nameserver"] != after["nameserver"]


def test_rendering_extras_copies_them() -> None:
    raw = {"template": {"sidecars": [SIDECAR], "volumes": [VOLUME]}}
    spec = parse_spec(raw)
    objects = render_cluster(CLUSTER, spec)
    for o in objects:
        if o["kind"] == "StatefulSet":
            pod = o["spec"]["template"]["spec"]
            pod["containers"][1]["args"].append("mutated")
            pod["volumes"][-1]["secret"]["secretName"] = "mutated"
    assert render_cluster(CLUSTER, spec) != objects
    assert spec.template.sidecars == [SIDECAR] and spec.template.volumes == [VOLUME]


# -- the reserved names are the operator's own ---------------------------------------------------------------------


@pytest.mark.parametrize("storage", ["persistentClaim", "ephemeral"])
def test_every_name_the_operators_pods_use_is_reserved(storage: str) -> None:
    for pod in _pods({"storage": {"type": storage}, "metrics": {"enabled": True}}).values():
        main = _main(pod)
        assert main["name"] in RESERVED_CONTAINERS
        assert {v["name"] for v in pod["volumes"]} <= set(RESERVED_VOLUMES)
        assert {e["name"] for e in main.get("env", [])} <= set(RESERVED_ENV)
        assert {m["mountPath"] for m in main["volumeMounts"]} <= set(RESERVED_MOUNT_PATHS)


@pytest.mark.parametrize(
    ("path", "reserved"),
    [
        ("/data", "/data"),
        ("/data/more", "/data"),
        ("/database", None),
        ("/etc/rocketcluster/x", "/etc/rocketcluster"),
        ("/etc/rocketclusters", None),
        ("/tmp", "/tmp"),
        ("/home/rocketmq/.cache", "/home/rocketmq"),
        ("/home", None),
        ("/", None),
    ],
)
def test_reserved_mount_path(path: str, reserved: str | None) -> None:
    assert reserved_mount_path(path) == reserved


# -- hostile specs ----------------------------------------------------------------------------------------------

_DEEP: dict[str, Any] = {"v": 1}
for _ in range(20):
    _DEEP = {"d": _DEEP}

_HOSTILE: list[tuple[str, dict[str, Any], str, str]] = [
    # (case, template, field path, words in the message)
    ("env as a map", {"env": {"A": "1"}}, "spec.template.env", "valid list"),
    ("env item a string", {"env": ["A=1"]}, "spec.template.env", "valid dictionary"),
    ("env without name", {"env": [{"value": "1"}]}, "spec.template.env", "needs a string name"),
    ("env name a number", {"env": [{"name": 7}]}, "spec.template.env", "needs a string name"),
    ("env name with '='", {"env": [{"name": "A=B"}]}, "spec.template.env", "not a valid env variable name"),
    ("env POD_INDEX", {"env": [{"name": "POD_INDEX", "value": "3"}]}, "spec.template.env", "operator's own"),
    ("env BROKER_IP1", {"env": [{"name": "BROKER_IP1", "value": "1.2.3.4"}]}, "spec.template.env", "operator's own"),
    ("env twice", {"env": [{"name": "A"}, {"name": "A"}]}, "spec.template.env", "given twice"),
    (
        "too many env",
        {"env": [{"name": f"E{i}"} for i in range(MAX_EXTRAS + 1)]},
        "spec.template.env",
        "at most 32 entries",
    ),
    ("env name oversized", {"env": [{"name": "A" * 300}]}, "spec.template.env", "not a valid env variable name"),
    ("volume data", {"volumes": [{"name": "data", "emptyDir": {}}]}, "spec.template.volumes", "operator's own"),
    ("volume config", {"volumes": [{"name": "config", "emptyDir": {}}]}, "spec.template.volumes", "operator's own"),
    ("volume tmp", {"volumes": [{"name": "tmp", "emptyDir": {}}]}, "spec.template.volumes", "operator's own"),
    ("volume name upper", {"volumes": [{"name": "Certs"}]}, "spec.template.volumes", "not a valid volume name"),
    ("volume too deep", {"volumes": [{"name": "x", "csi": _DEEP}]}, "spec.template.volumes", "nested deeper"),
    ("volume key not a str", {"volumes": [{"name": "x", 1: 2}]}, "spec.template.volumes", "valid string"),
    ("mount /data", {"volumeMounts": [{"name": "x", "mountPath": "/data"}]}, "spec.template.volumeMounts", "/data"),
    (
        "mount under the config",
        {"volumeMounts": [{"name": "x", "mountPath": "/etc/rocketcluster/extra"}]},
        "spec.template.volumeMounts",
        "/etc/rocketcluster",
    ),
    ("mount relative", {"volumeMounts": [{"name": "x", "mountPath": "data"}]}, "spec.template.volumeMounts", "valid"),
    (
        "mount with '..'",
        {"volumeMounts": [{"name": "x", "mountPath": "/x/../data"}]},
        "spec.template.volumeMounts",
        "'..'",
    ),
    ("mount without a name", {"volumeMounts": [{"mountPath": "/x"}]}, "spec.template.volumeMounts", "string name"),
    (
        "mount path twice",
        {"volumeMounts": [{"name": "a", "mountPath": "/x"}, {"name": "b", "mountPath": "/x"}]},
        "spec.template.volumeMounts",
        "given twice",
    ),
    ("sidecar named broker", {"sidecars": [{"name": "broker", "image": "x"}]}, "spec.template.sidecars", "own"),
    (
        "init named nameserver",
        {"initContainers": [{"name": "nameserver", "image": "x"}]},
        "spec.template.initContainers",
        "operator's own container",
    ),
    ("sidecar without image", {"sidecars": [{"name": "s"}]}, "spec.template.sidecars", "needs a string image"),
    ("sidecar image empty", {"sidecars": [{"name": "s", "image": ""}]}, "spec.template.sidecars", "string image"),
    ("sidecar as a list", {"sidecars": [["s", "x"]]}, "spec.template.sidecars", "valid dictionary"),
    (
        "init and sidecar share a name",
        {"initContainers": [{"name": "s", "image": "x"}], "sidecars": [{"name": "s", "image": "y"}]},
        "spec",
        "both an init container and a sidecar",
    ),
    ("fixedUserIds a string", {"fixedUserIds": "false"}, "spec.template.fixedUserIds", "valid boolean"),
]


@pytest.mark.parametrize(("template", "path", "words"), [r[1:] for r in _HOSTILE], ids=[r[0] for r in _HOSTILE])
def test_hostile_extras_are_refused_naming_the_field(template: dict[str, Any], path: str, words: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec({"template": template})
    problems = caught.value.problems
    assert any(p.startswith(path) and words in m for p, m in problems), problems


def test_a_clash_across_the_cluster_and_component_templates_is_refused() -> None:
    raw = {
        "template": {"initContainers": [{"name": "s", "image": "x"}]},
        "broker": {"template": {"sidecars": [{"name": "s", "image": "y"}]}},
    }
    with pytest.raises(SpecError, match="broker pods: container 's' is both"):
        parse_spec(raw)
    # the NameServer's merged template has no such sidecar: only the broker is named
    with pytest.raises(SpecError) as caught:
        parse_spec(raw)
    assert "nameServer pods" not in str(caught.value)
