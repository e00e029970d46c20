"""The Helm chart's files and the Kubernetes examples, without a cluster: the chart ships the very CRD the
operator is generated with, the chart and the operator image agree on the image, and every example parses,
is a spec the operator accepts and calls `mqadmin` with flags it has. e2e/test_chart.py runs the chart and
the examples against a real API server."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from broker.cli.mqadmin import build_parser
from rocketcluster import names
from rocketcluster.model import DEFAULT_IMAGE, RocketClusterSpec, parse_spec
from rocketcluster.model_resources import parse_group_spec, parse_topic_spec
from rocketcluster.model_users import parse_user_spec

yaml = pytest.importorskip("yaml", reason="PyYAML comes with the `operator` extra")

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "rocketcluster-operator"
CRD_NAMES = [
    "clusterkopfpeerings.kopf.dev.yaml",  # kopf's peering resources (replicas with --peering)
    "kopfpeerings.kopf.dev.yaml",
    "rocketclusters.rocketcluster.io.yaml",
    "rocketconsumergroups.rocketcluster.io.yaml",
    "rockettopics.rocketcluster.io.yaml",
    "rocketusers.rocketcluster.io.yaml",
]
EXAMPLES = REPO / "examples" / "kubernetes"
EXAMPLE_FILES = sorted(EXAMPLES.glob("*.yaml"))
CRD_SYNC_COMMAND = "make crds (it copies crds/*.yaml to charts/rocketcluster-operator/crds/)"


def _documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc is not None]


def _clusters() -> dict[str, RocketClusterSpec]:
    """Every RocketCluster in the examples, by name, parsed as the operator parses it."""
    found = {}
    for path in EXAMPLE_FILES:
        for doc in _documents(path):
            if doc["kind"] == names.KIND:
                found[doc["metadata"]["name"]] = parse_spec(doc.get("spec"))
    return found


def _image_env() -> dict[str, str]:
    text = (REPO / "images" / "operator" / "image.env").read_text(encoding="utf-8")
    return dict(re.findall(r"^([A-Z_]+)=\"?([^\"\n]*)\"?$", text, flags=re.MULTILINE))


# -- the chart ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("crd_name", CRD_NAMES)
def test_the_chart_ships_the_top_level_crds_byte_for_byte(crd_name: str) -> None:
    top = (REPO / "crds" / crd_name).read_bytes()
    shipped = (CHART / "crds" / crd_name).read_bytes()
    assert shipped == top, (
        f"charts/rocketcluster-operator/crds/{crd_name} differs from crds/{crd_name}: run `{CRD_SYNC_COMMAND}`"
    )


def test_the_chart_ships_every_crd_and_nothing_else() -> None:
    assert sorted(p.name for p in (CHART / "crds").iterdir()) == CRD_NAMES
    assert sorted(p.name for p in (REPO / "crds").iterdir()) == CRD_NAMES


def test_the_chart_runs_the_operator_image_that_images_operator_builds() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    image = _image_env()
    assert chart["apiVersion"] == "v2"
    assert chart["appVersion"] == image["TAG"], "Chart.yaml appVersion is the operator image's tag"
    assert values["image"]["repository"] == image["IMAGE"]
    assert values["image"]["tag"] == "", "an empty tag means appVersion, so the two cannot drift"


def test_every_default_value_is_declared_in_the_schema() -> None:
    """values.schema.json refuses unknown top-level keys, so a default the schema lacks would break install."""
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert schema["additionalProperties"] is False
    assert sorted(set(values) - set(schema["properties"])) == []
    assert set(schema["required"]) <= set(values)


# -- the examples -----------------------------------------------------------------------------------------------


def test_the_examples_are_there() -> None:
    assert [p.name for p in EXAMPLE_FILES] == [
        "consumer-group.yaml",
        "minimal.yaml",
        "producer-consumer-job.yaml",
        "production.yaml",
        "secure.yaml",
        "topic.yaml",
    ]


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_an_example_parses_and_its_clusters_are_specs_the_operator_accepts(path: Path) -> None:
    docs = _documents(path)
    assert docs, f"{path.name} holds no object"
    for doc in docs:
        assert {"apiVersion", "kind", "metadata"} <= set(doc), f"{path.name}: {doc}"
        assert "namespace" not in doc["metadata"], "examples are applied to a namespace the user chooses"
        if doc["kind"] == names.KIND:
            assert doc["apiVersion"] == names.API_VERSION
            name = doc["metadata"]["name"]
            assert len(name) <= names.MAX_CLUSTER_NAME_LENGTH
            parse_spec(doc.get("spec"))  # raises SpecError naming the field
        if doc["kind"] in (names.TOPIC_KIND, names.CONSUMER_GROUP_KIND):
            assert doc["apiVersion"] == names.API_VERSION
            parse = parse_topic_spec if doc["kind"] == names.TOPIC_KIND else parse_group_spec
            assert parse(doc.get("spec")).cluster_ref in _clusters(), "it names an example cluster"
        if doc["kind"] == names.USER_KIND:
            assert doc["apiVersion"] == names.API_VERSION
            assert parse_user_spec(doc.get("spec")).cluster_ref in _clusters(), "it names an example cluster"


def test_minimal_is_one_group_of_a_master_and_a_slave_on_ephemeral_storage() -> None:
    spec = _clusters()["minimal"]
    assert (spec.broker.groups, spec.broker.slaves_per_group) == (1, 1)
    assert spec.storage.type == "ephemeral"


def test_production_is_what_its_comments_say() -> None:
    spec = _clusters()["production"]
    assert spec.name_server.replicas == 3
    assert (spec.broker.groups, spec.broker.slaves_per_group) == (2, 1)
    assert (spec.broker.replication, spec.broker.flush_disk_type) == ("SYNC", "ASYNC_FLUSH")
    assert spec.storage.type == "persistentClaim" and spec.storage.storage_class_name
    assert spec.placement.anti_affinity == "required"
    assert spec.broker.resources.requests and spec.broker.resources.limits
    assert spec.name_server.resources.requests
    assert spec.rollout.require_in_sync_slave and spec.scale_down.drain


def _job() -> dict[str, Any]:
    [job] = _documents(EXAMPLES / "producer-consumer-job.yaml")
    assert job["kind"] == "Job"
    return job


def test_the_job_reads_the_connection_config_map_of_an_example_cluster() -> None:
    [container] = _job()["spec"]["template"]["spec"]["containers"]
    assert container["image"] == DEFAULT_IMAGE, "the broker image is the one that has mqadmin"
    [source] = container["envFrom"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    cluster = env["CLUSTER"]
    assert cluster in _clusters(), f"CLUSTER={cluster} names no example cluster"
    assert source == {"configMapRef": {"name": names.connection_config_map(cluster)}}
    assert int(env["COUNT"]) > 0


def _mqadmin_commands(script: str) -> list[list[str]]:
    """Each `mqadmin ...` command of a shell script, continuation lines joined, cut at a redirection or pipe,
    with shell variables replaced by 1 (a word that is also a number)."""
    joined = script.replace("\\\n", " ")
    commands = []
    for line in joined.splitlines():
        match = re.search(r"\bmqadmin\s+(.*)", line)
        if match is None:
            continue
        words = shlex.split(re.sub(r"\$\(\(.*?\)\)|\$\{?\w+\}?", "1", match.group(1)), comments=True)
        cut = next((i for i, w in enumerate(words) if w in ("|", ">", ">>") or w.startswith((">", "|"))), None)
        commands.append(words[:cut])
    return commands


def test_the_job_calls_mqadmin_with_flags_it_has() -> None:
    [container] = _job()["spec"]["template"]["spec"]["containers"]
    script = container["args"][0]
    commands = _mqadmin_commands(script)
    assert [c[0] for c in commands] == ["updateTopic", "sendMessage", "consumeMessage"]
    parser = build_parser()
    for words in commands:
        parser.parse_args([*words, "-n", "ns:9876"])  # argparse exits on an unknown flag or a bad value
    assert re.findall(r'-t "([^"]*)"', script) == ["$topic"] * 3, "one topic, created, written and read"
    consume = parser.parse_args([*commands[2], "-n", "ns:9876"])
    assert consume.timeout >= 30, "a pod's first pulls wait for routes and long polling: give them time"


def test_the_mqadmin_command_extraction_reads_pipes_and_continuations() -> None:
    script = 'mqadmin a -t "$T" > /dev/null\ngot=$(mqadmin b -c "$N" \\\n  --timeout 5 | wc -l)\necho mqadmin-less\n'
    assert _mqadmin_commands(script) == [["a", "-t", "1"], ["b", "-c", "1", "--timeout", "5"]]


def test_secure_turns_everything_on_and_its_user_has_rules() -> None:
    spec = _clusters()["secure"]
    security = spec.security
    assert security.authentication.enabled and security.authorization.enabled
    assert security.tls.enabled and security.tls.secret_name == "secure-cert"
    [user] = [d for d in _documents(EXAMPLES / "secure.yaml") if d["kind"] == names.USER_KIND]
    assert [a.resource.rocketmq() for a in parse_user_spec(user["spec"]).acls] == [
        "Topic:orders",
        "Group:orders-*",
        "Topic:orders-audit",
    ]
