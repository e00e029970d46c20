"""spec.security as Kubernetes objects and pod settings (pure): the brokers' and NameServers' security keys, the
operator's credentials Secret, the cert-manager Certificate, and the pod template changes that feed both to the
processes without a secret in any ConfigMap.

The secret keys (`initAuthenticationUser`, `innerClientAuthenticationCredentials`) live only in the Secret
`<c>-operator-credentials` (key `auth.properties`). The pods mount it, and their start command lays that file
after the ConfigMap's broker.conf (or namesrv.conf) into one file under /tmp (an emptyDir: the root filesystem
is read-only), which the process reads. The non-secret keys (authenticationEnabled, tls.*) stay in the
ConfigMap, where the config hash sees them.

TLS: the certificate Secret (spec.security.tls.secretName, or the one cert-manager writes for the Certificate
rendered here) is mounted at TLS_DIR; every port serves TLS only (tls.server.mode=enforcing) and the brokers'
own connections (registration, slave sync, HA) use TLS (tls.enable). Pod IPs are not known when a certificate
is issued, so the brokers do not verify each other's host names (RocketMQ's default, tls.client.authServer
false); clients verify the certificate against the CA and the name they dial.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import shlex
from collections.abc import Mapping
from typing import Any, Final

from rocketcluster import names
from rocketcluster.model import RocketClusterSpec
from rocketcluster.names import ClusterRef
from rocketcluster.render_grpc import grpc_certificate_names

__all__ = [
    "ACCESS_KEY",
    "AUTH_FILE",
    "CREDENTIALS_DIR",
    "OPERATOR_USER",
    "SECRET_KEY",
    "TLS_DIR",
    "auth_properties",
    "broker_security_defaults",
    "broker_security_properties",
    "certificate_name",
    "nameserver_security_properties",
    "operator_secret_name",
    "render_certificate",
    "render_operator_secret",
    "secrets_hash",
    "secure_pod_template",
    "tls_secret_name",
]

Obj = dict[str, Any]

OPERATOR_USER: Final = "rocketcluster-operator"
ACCESS_KEY: Final = "accessKey"
SECRET_KEY: Final = "secretKey"
AUTH_FILE: Final = "auth.properties"
CREDENTIALS_DIR: Final = "/etc/rocketcluster-credentials"
TLS_DIR: Final = "/etc/rocketcluster-tls"
STATEFUL_STRATEGY: Final = "org.apache.rocketmq.auth.authentication.strategy.StatefulAuthenticationStrategy"
_CREDENTIALS_VOLUME: Final = "credentials"
_TLS_VOLUME: Final = "tls"
# Owner and group may read (the pods run with fsGroup 10001, which the kubelet gives the files): 0440.
_SECRET_FILE_MODE: Final = 0o440
# What the start command writes the merged file to: /tmp is the pod's emptyDir.
_MERGED_DIR: Final = "/tmp"


def operator_secret_name(c: str) -> str:
    """The Secret with the operator's own SUPER user (made once by the operator, owned by the cluster)."""
    return f"{c}-operator-credentials"


def certificate_name(c: str) -> str:
    """The cert-manager Certificate (and its Secret) when spec.security.tls.issuerRef is set."""
    return f"{c}-tls"


def tls_secret_name(c: str, spec: RocketClusterSpec) -> str | None:
    """The certificate Secret the pods mount, or None without TLS."""
    tls = spec.security.tls
    if not tls.enabled:
        return None
    return tls.secret_name or certificate_name(c)


def _tls_properties(spec: RocketClusterSpec) -> dict[str, str]:
    if not spec.security.tls.enabled:
        return {}
    return {
        "tls.server.mode": "enforcing",
        "tls.server.certPath": f"{TLS_DIR}/tls.crt",
        "tls.server.keyPath": f"{TLS_DIR}/tls.key",
        "tls.test.mode.enable": "false",
        "tls.enable": "true",
    }


def broker_security_properties(spec: RocketClusterSpec) -> dict[str, str]:
    """The broker.conf keys of spec.security that are not secret (they go into the group's ConfigMap)."""
    out: dict[str, str] = {}
    if spec.security.authentication.enabled:
        out["authenticationEnabled"] = "true"
        out["authorizationEnabled"] = "true" if spec.security.authorization.enabled else "false"
    return out | _tls_properties(spec)


def broker_security_defaults(spec: RocketClusterSpec) -> dict[str, str]:
    """broker.conf keys the operator sets with spec.security unless spec.broker.config sets them.

    Authentication over TLS uses RocketMQ's stateful strategy: TLS keeps anyone from forging or splicing bytes
    into a connection, so the first good signature of a user on it vouches for that user's later requests on it
    (for statefulAuthenticationCacheExpiredSecond, and no longer once any user changes). The stateless default
    would verify an HMAC over every request and its body again, which buys nothing more over TLS. Without TLS
    each request keeps its own check."""
    if spec.security.authentication.enabled and spec.security.tls.enabled:
        return {"authenticationStrategy": STATEFUL_STRATEGY}
    return {}


def nameserver_security_properties(spec: RocketClusterSpec) -> dict[str, str]:
    """namesrv.conf's keys of spec.security: its writes need a signature; it serves TLS only."""
    out: dict[str, str] = {}
    if spec.security.authentication.enabled:
        out["authenticationEnabled"] = "true"
    tls = _tls_properties(spec)
    tls.pop("tls.enable", None)  # the NameServer dials no one
    return out | tls


def auth_properties(access_key: str, secret_key: str, inner: tuple[str, str] | None = None) -> str:
    """The secret keys, as properties text: the operator's user is both the initial SUPER user and the inner
    client the brokers sign their own requests with (slave sync, registration, restore). `inner` (access key,
    secret key) names another inner user: a rotation's intermediate files (rocketcluster.plan_credentials)."""
    inner_key, inner_secret = inner or (access_key, secret_key)
    user = json.dumps({"username": access_key, "password": secret_key}, separators=(",", ":"))
    client = json.dumps({"accessKey": inner_key, "secretKey": inner_secret}, separators=(",", ":"))
    # java.util.Properties reads a backslash as an escape; JSON of these names holds none unless a value does.
    lines = [f"initAuthenticationUser={user.replace(chr(92), chr(92) * 2)}"]
    lines.append(f"innerClientAuthenticationCredentials={client.replace(chr(92), chr(92) * 2)}")
    return "\n".join(lines) + "\n"


def render_operator_secret(cluster: ClusterRef, secret_key: str, access_key: str = OPERATOR_USER) -> Obj:
    """The operator's credentials Secret. The caller makes `secret_key` (random) once; the Secret is created, never
    applied over, so a restart of the operator never changes it."""
    from rocketcluster.render import owner_reference  # render imports this module

    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": operator_secret_name(cluster.name),
            "namespace": cluster.namespace,
            "labels": names.shared_labels(cluster.name),
            "ownerReferences": [owner_reference(cluster)],
        },
        "type": "Opaque",
        "stringData": {
            ACCESS_KEY: access_key,
            SECRET_KEY: secret_key,
            AUTH_FILE: auth_properties(access_key, secret_key),
        },
    }


def render_certificate(cluster: ClusterRef, spec: RocketClusterSpec) -> Obj | None:
    """The cert-manager Certificate for spec.security.tls.issuerRef (None otherwise). Its DNS names are the ones
    clients dial: the NameServer Services and pods, and the brokers' per-pod names."""
    tls = spec.security.tls
    if not tls.enabled or tls.issuer_ref is None:
        return None
    from rocketcluster.render import owner_reference

    c, ns = cluster.name, cluster.namespace
    dns = [
        f"{names.nameserver_service(c)}.{ns}.svc",
        f"{names.nameserver_service(c)}.{ns}.svc.cluster.local",
        f"*.{names.nameserver_headless_service(c)}.{ns}.svc",
        f"*.{names.nameserver_headless_service(c)}.{ns}.svc.cluster.local",
        f"*.{names.broker_headless_service(c)}.{ns}.svc",
        f"*.{names.broker_headless_service(c)}.{ns}.svc.cluster.local",
        *grpc_certificate_names(c, ns, spec),
    ]
    return {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": {
            "name": certificate_name(c),
            "namespace": ns,
            "labels": names.shared_labels(c),
            "ownerReferences": [owner_reference(cluster)],
        },
        "spec": {
            "secretName": certificate_name(c),
            "commonName": f"{names.nameserver_service(c)}.{ns}.svc",
            "dnsNames": dns,
            "usages": ["server auth", "client auth"],
            "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
            "issuerRef": {"name": tls.issuer_ref.name, "kind": tls.issuer_ref.kind, "group": tls.issuer_ref.group},
        },
    }


def secrets_hash(secrets: Mapping[str, Mapping[str, str] | None]) -> str:
    """SHA-256 (hex) of the Secrets' data by name (a missing Secret counts as empty), independent of order."""
    canonical = json.dumps(
        {name: dict(sorted((data or {}).items())) for name, data in sorted(secrets.items())},
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


# `exec <program> -c <file>` inside a shell start command (spec.externalAccess's LoadBalancer form)
_EXEC_WITH_CONF = re.compile(r"exec (mqbroker|mqnamesrv) -c ('[^']*'|\S+)")


def _merge_then_exec(program: str, conf: str) -> str:
    merged = f"{_MERGED_DIR}/{conf.rsplit('/', 1)[-1]}"
    # Kubernetes expands $(POD_INDEX) in the command before the shell sees it
    merge = f"cat '{conf}' '{CREDENTIALS_DIR}/{AUTH_FILE}' > '{merged}'"
    return f"umask 077 && {merge} && exec {program} -c '{merged}'"


def _start_command(command: list[str]) -> list[str]:
    """The start command run on its config file with the credentials file after it, merged in /tmp: either
    `<program> -c <file>` or a shell script that ends in `exec <program> -c <file>`."""
    if len(command) == 3 and command[:2] == ["sh", "-c"]:
        found = _EXEC_WITH_CONF.search(command[2])
        if found is None:
            raise ValueError("the shell start command does not exec mqbroker or mqnamesrv with -c <file>")
        conf = shlex.split(found.group(2))[0]
        script = command[2][: found.start()] + _merge_then_exec(found.group(1), conf) + command[2][found.end() :]
        return ["sh", "-c", script]
    *program, flag, conf = command
    if flag != "-c":
        raise ValueError(f"the start command {command!r} does not end in -c <file>")
    return ["sh", "-c", _merge_then_exec(" ".join(program), conf)]


def _with_probe_flags(command: list[str], flags: list[str]) -> list[str]:
    """The readiness probe's command with `flags` appended (to its script when it is a shell one)."""
    if len(command) == 3 and command[:2] == ["sh", "-c"]:
        return ["sh", "-c", " ".join([command[2], *flags])]
    return [*command, *flags]


def secure_pod_template(pod: Obj, cluster: ClusterRef, spec: RocketClusterSpec) -> Obj:
    """A rendered pod template with spec.security applied: the credentials and certificate volumes, the start
    command that merges the credentials into the config, the probe's flags, and the secrets-hash annotation.
    Unchanged (the same object) when security is off. Applied last, over what spec.externalAccess changed."""
    auth = spec.security.authentication.enabled
    tls_secret = tls_secret_name(cluster.name, spec)
    if not auth and tls_secret is None:
        return pod
    pod = copy.deepcopy(pod)
    body = pod["spec"]
    volumes = body.setdefault("volumes", [])
    if auth:
        volumes.append(
            {
                "name": _CREDENTIALS_VOLUME,
                "secret": {"secretName": operator_secret_name(cluster.name), "defaultMode": _SECRET_FILE_MODE},
            }
        )
    if tls_secret is not None:
        volumes.append({"name": _TLS_VOLUME, "secret": {"secretName": tls_secret, "defaultMode": _SECRET_FILE_MODE}})
    main = (names.BROKER_CONTAINER, names.NAMESERVER_CONTAINER)
    container = next(c for c in body["containers"] if c.get("name") in main)
    mounts = container.setdefault("volumeMounts", [])
    probe_flags: list[str] = []
    if auth:
        mounts.append({"name": _CREDENTIALS_VOLUME, "mountPath": CREDENTIALS_DIR, "readOnly": True})
        container["command"] = _start_command(container["command"])
        probe_flags += ["--credentials-dir", CREDENTIALS_DIR]
    if tls_secret is not None:
        mounts.append({"name": _TLS_VOLUME, "mountPath": TLS_DIR, "readOnly": True})
        probe_flags.append("--tls")
    readiness = container.get("readinessProbe") or {}
    probe_command = (readiness.get("exec") or {}).get("command")
    if probe_command and probe_flags:
        readiness["exec"]["command"] = _with_probe_flags(probe_command, probe_flags)
    if cluster.secrets_hash:
        annotations = pod.setdefault("metadata", {}).setdefault("annotations", {})
        annotations[names.ANNOTATION_SECRETS_HASH] = cluster.secrets_hash
        pod["metadata"]["annotations"] = dict(sorted(annotations.items()))
    return pod
