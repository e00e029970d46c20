"""The operator's status writes against a real kube-apiserver (the fixture of test_crd_apiserver): a user may
delete a RocketCluster while a pass over it runs, and the pass's closing status write then meets a 404. That is
the end of the object, not a failed pass: the write answers None, and nothing raises into kopf (which would log
a traceback and retry a pass over an object that no longer exists)."""

from __future__ import annotations

import json

import pytest

from rocketcluster import names
from rocketcluster.kube import ApiError
from tests.operator.test_crd_apiserver import NAMESPACE, Kubectl
from tests.operator.test_crd_apiserver import kubectl as kubectl  # the module-scoped API server fixture

pytestmark = pytest.mark.k8s


async def test_a_status_write_to_a_cluster_deleted_meanwhile_answers_none(kubectl: Kubectl) -> None:
    cluster = {"apiVersion": names.API_VERSION, "kind": names.KIND, "metadata": {"name": "going"}, "spec": {}}
    kubectl.ok("create", "-f", "-", input=json.dumps(cluster))
    kube = kubectl.api_client()
    try:
        written = await kube.patch_status(NAMESPACE, "going", {"phase": "Creating"})
        assert written is not None and written["status"]["phase"] == "Creating"

        kubectl.ok("delete", names.KIND.lower(), "going", "--wait=true")
        assert await kube.patch_status(NAMESPACE, "going", {"phase": "Running"}) is None

        # other refusals still raise: a status the schema refuses is the operator's own error
        kubectl.ok("create", "-f", "-", input=json.dumps(cluster))
        with pytest.raises(ApiError) as refused:
            await kube.patch_status(NAMESPACE, "going", {"conditions": "not a list"})
        assert refused.value.status == 422
    finally:
        await kube.close()
