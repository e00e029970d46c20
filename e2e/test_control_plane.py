"""Control-plane tier: CRDs with a status subresource, and owner-reference garbage collection."""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from e2e.conftest import Kube

pytestmark = pytest.mark.k8s

GROUP = "e2e.rocketcluster.io"

CRD = f"""
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.{GROUP}
spec:
  group: {GROUP}
  scope: Namespaced
  names: {{plural: widgets, singular: widget, kind: Widget}}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {{status: {{}}}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {{type: integer, minimum: 1}}
          status:
            type: object
            properties:
              phase: {{type: string}}
              observedSize: {{type: integer}}
"""


@pytest.fixture(scope="module")
def widgets(k8s_control_plane: Kube) -> Kube:
    kube = k8s_control_plane
    kube.apply(CRD)
    kube.wait_established(f"widgets.{GROUP}")
    return kube


@pytest.fixture
def namespace(k8s_control_plane: Kube):
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    k8s_control_plane.run("create", "namespace", name)
    yield name
    k8s_control_plane.run("delete", "namespace", name, "--wait=false", check=False)


def test_apiserver_reports_pinned_version(k8s_control_plane: Kube) -> None:
    version = json.loads(k8s_control_plane.run("get", "--raw", "/version"))
    assert version["major"] == "1"
    assert version["gitVersion"].startswith("v1.")
    assert "master" not in version["gitVersion"], "ldflags version stamping missing"


def test_status_subresource(widgets: Kube, namespace: str) -> None:
    # Status sent with the create is dropped: with a status subresource only /status may set it.
    widgets.apply(
        """
apiVersion: e2e.rocketcluster.io/v1
kind: Widget
metadata: {name: w1}
spec: {size: 3}
status: {phase: Forged}
""",
        namespace=namespace,
    )
    obj = widgets.get("-n", namespace, "widget", "w1")
    assert obj["spec"] == {"size": 3}
    assert "status" not in obj or obj["status"].get("phase") != "Forged"

    widgets.run(
        "patch", "-n", namespace, "widget", "w1", "--subresource=status", "--type=merge",
        "-p", '{"status": {"phase": "Ready", "observedSize": 3}}',
    )  # fmt: skip
    obj = widgets.get("-n", namespace, "widget", "w1")
    assert obj["status"] == {"phase": "Ready", "observedSize": 3}
    generation = obj["metadata"]["generation"]

    # A status change does not bump the generation; a spec change does, and leaves status alone.
    widgets.run("patch", "-n", namespace, "widget", "w1", "--type=merge", "-p", '{"spec": {"size": 5}}')
    obj = widgets.get("-n", namespace, "widget", "w1")
    assert obj["metadata"]["generation"] == generation + 1
    assert obj["status"]["phase"] == "Ready"

    # Schema validation runs on the API server.
    bad = widgets.run(
        "patch", "-n", namespace, "widget", "w1", "--type=merge", "-p", '{"spec": {"size": 0}}', check=False
    )
    assert widgets.get("-n", namespace, "widget", "w1")["spec"]["size"] == 5, bad


def test_owner_reference_garbage_collection(widgets: Kube, namespace: str) -> None:
    widgets.apply(
        "apiVersion: e2e.rocketcluster.io/v1\nkind: Widget\nmetadata: {name: owner}\nspec: {size: 1}\n",
        namespace=namespace,
    )
    owner_uid = widgets.get("-n", namespace, "widget", "owner")["metadata"]["uid"]
    child = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "owned-child",
            "namespace": namespace,
            "ownerReferences": [
                {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "name": "owner", "uid": owner_uid,
                 "controller": True, "blockOwnerDeletion": True}
            ],
        },
        "data": {"k": "v"},
    }  # fmt: skip
    widgets.apply(json.dumps(child))
    orphan = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "unowned", "namespace": namespace}}
    widgets.apply(json.dumps(orphan))
    assert widgets.get("-n", namespace, "configmap", "owned-child")["data"] == {"k": "v"}

    widgets.run("delete", "-n", namespace, "widget", "owner", "--wait=true", "--timeout=30s")

    def child_gone() -> bool:
        out = widgets.run("get", "-n", namespace, "configmap", "owned-child", "--ignore-not-found", "-o", "name")
        return out.strip() == ""

    widgets.wait_for("the garbage collector to delete the owned ConfigMap", child_gone, timeout=60)
    # The collector only removes dependents.
    assert widgets.get("-n", namespace, "configmap", "unowned")["metadata"]["name"] == "unowned"
