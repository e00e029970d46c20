"""How the operator reaches a secured cluster, and the Secrets that security needs: the operator's own
credentials (made random; rotated by rocketcluster.credentials_rotation), the certificate Secret, and the hash
of both that rolls the pods.

The operator's secret key is made here with `secrets.token_urlsafe` and written only to the Secret; it is never
logged, never in a ConfigMap, a status or an Event. Every admin call of the operator (the cluster's pass, the
topic, group and user passes) signs with it and uses TLS when spec.security.tls is on.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import os
import secrets
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from broker.client.config import ClientConfig
from broker.protocol.signature import Credentials
from rocketcluster import names
from rocketcluster.kube import ApiError, Kube, resource_path
from rocketcluster.model import RocketClusterSpec
from rocketcluster.plan_credentials import CredentialsError, hashed_view, parse_auth_file
from rocketcluster.render_security import (
    operator_secret_name,
    render_operator_secret,
    secrets_hash,
    tls_secret_name,
)

__all__ = [
    "CERT_MANAGER_CRD",
    "AdminAccess",
    "SecretMissing",
    "admin_access",
    "cert_manager_installed",
    "prepare",
    "secret_data",
]

log = logging.getLogger("rocketcluster.operator")

CERT_MANAGER_CRD = "certificates.cert-manager.io"
_SECRET_BYTES = 32  # 256 bits of randomness for the operator's secret key


class SecretMissing(Exception):
    """A Secret security needs is not there (yet): the message names it."""


@dataclass(frozen=True, slots=True)
class AdminAccess:
    """What the operator's admin client needs to talk to one cluster: credentials and TLS. Its repr shows no
    secret (Credentials hides it)."""

    credentials: Credentials | None = None
    use_tls: bool = False
    ca_file: str | None = None

    def client_config(self, namesrv_addr: str) -> ClientConfig:
        """The admin client's config. The operator dials pod IPs, which no certificate names, so the server's
        certificate is checked against the cluster's CA (ca.crt of its Secret) but not against the address."""
        return ClientConfig(
            namesrv_addr=namesrv_addr,
            instance_name=f"admin-{time.monotonic_ns()}",
            credentials=self.credentials,
            use_tls=self.use_tls,
            tls_ca_file=self.ca_file,
            tls_verify=self.ca_file is not None,
            tls_check_hostname=False,
        )


def secret_data(secret: Mapping[str, Any] | None) -> dict[str, str] | None:
    """A Secret's data, decoded (a value that is not base64 of UTF-8 is left out); None for no Secret."""
    if secret is None:
        return None
    out: dict[str, str] = {}
    for key, value in (secret.get("data") or {}).items():
        try:
            out[str(key)] = base64.b64decode(str(value), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            continue
    return out


async def _ensure_operator_secret(kube: Kube, cluster: names.ClusterRef) -> dict[str, str]:
    """The operator's credentials, creating their Secret the first time (create only: never overwritten)."""
    name = operator_secret_name(cluster.name)
    found = secret_data(await kube.get("v1", "Secret", cluster.namespace, name))
    if found is not None:
        return found
    secret = render_operator_secret(cluster, secrets.token_urlsafe(_SECRET_BYTES))
    try:
        await kube.request("POST", resource_path("v1", "Secret", cluster.namespace), body=secret)
        log.info("%s/%s: created the Secret %s with the operator's credentials", cluster.namespace, cluster.name, name)
    except ApiError as exc:
        if exc.status != 409:  # 409: another operator replica made it first; read theirs
            raise
    found = secret_data(await kube.get("v1", "Secret", cluster.namespace, name))
    if found is None:
        raise SecretMissing(f"Secret {name} was created but cannot be read back")
    return found


def _credentials(data: Mapping[str, str] | None, name: str) -> Credentials:
    """What the operator signs with: the inner user of the Secret's auth.properties, which every NameServer and
    broker accepts at every step of a rotation (rocketcluster.plan_credentials)."""
    try:
        return parse_auth_file(data, name).inner
    except CredentialsError as exc:
        raise SecretMissing(str(exc)) from None


def _ca_file(pem: str | None) -> str | None:
    """The CA certificate as a file the SSL context can load (one per content, in the temp directory)."""
    if not pem:
        return None
    digest = hashlib.sha256(pem.encode("utf-8")).hexdigest()[:24]
    path = os.path.join(tempfile.gettempdir(), f"rocketcluster-ca-{digest}.pem")
    if not os.path.exists(path):
        fd, partial = tempfile.mkstemp(dir=tempfile.gettempdir(), prefix="rocketcluster-ca-")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(pem)
        os.replace(partial, path)
    return path


async def cert_manager_installed(kube: Kube) -> bool:
    """Whether cert-manager's Certificate CRD is in the Kubernetes cluster."""
    try:
        found = await kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", None, CERT_MANAGER_CRD)
    except ApiError as exc:
        if exc.status == 403:  # not allowed to look: assume it is there, the apply of the Certificate will tell
            return True
        raise
    return found is not None


async def prepare(
    kube: Kube, cluster: names.ClusterRef, spec: RocketClusterSpec
) -> tuple[names.ClusterRef, AdminAccess]:
    """For a cluster's own pass: its Secrets made or read, the ClusterRef carrying their hash (so a change rolls
    the pods), and the admin access. A certificate Secret that cert-manager has not issued yet counts as empty:
    the pods wait for it (the kubelet does not start a pod whose Secret volume is missing). A secretName that
    names no Secret raises SecretMissing, which the pass reports."""
    if not spec.security.authentication.enabled and not spec.security.tls.enabled:
        return cluster, AdminAccess()
    material: dict[str, dict[str, str] | None] = {}
    credentials = None
    if spec.security.authentication.enabled:
        data = await _ensure_operator_secret(kube, cluster)
        material[operator_secret_name(cluster.name)] = hashed_view(data)
        credentials = _credentials(data, operator_secret_name(cluster.name))
    ca = None
    tls_name = tls_secret_name(cluster.name, spec)
    if tls_name is not None:
        tls = secret_data(await kube.get("v1", "Secret", cluster.namespace, tls_name))
        if tls is None and spec.security.tls.secret_name is not None:
            # the user's Secret: nothing would make it, and the pods would wait for it without a word
            raise SecretMissing(f"spec.security.tls.secretName: Secret {tls_name} is not in {cluster.namespace}")
        material[tls_name] = tls
        ca = (tls or {}).get("ca.crt")
    ref = names.ClusterRef(cluster.name, cluster.namespace, cluster.uid, secrets_hash(material))
    return ref, AdminAccess(credentials, spec.security.tls.enabled, _ca_file(ca))


async def admin_access(kube: Kube, namespace: str, name: str, spec: RocketClusterSpec) -> AdminAccess:
    """For the passes of topics, groups and users: the cluster's access, read only (the cluster's own pass makes
    the Secrets). Raises SecretMissing while the operator's credentials are not there yet."""
    credentials = None
    if spec.security.authentication.enabled:
        secret = operator_secret_name(name)
        credentials = _credentials(secret_data(await kube.get("v1", "Secret", namespace, secret)), secret)
    ca = None
    tls_name = tls_secret_name(name, spec)
    if tls_name is not None:
        ca = (secret_data(await kube.get("v1", "Secret", namespace, tls_name)) or {}).get("ca.crt")
    return AdminAccess(credentials, spec.security.tls.enabled, _ca_file(ca))
