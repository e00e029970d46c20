"""spec.security: the model's refusals, the brokers' and NameServers' keys (read back by their own loaders, with
the credentials file laid after the ConfigMap's file as the pods' start command does), the pod settings, the
Certificate, and the secrets hash that rolls the pods. Pure: no API server."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from broker.auth.settings import STATELESS_AUTHENTICATION, parse_stateful
from broker.config.properties import parse_properties
from broker.namesrv.config import NamesrvConfig
from broker.server.config import load_broker_config
from rocketcluster import names
from rocketcluster.model import SpecError, parse_spec
from rocketcluster.names import ClusterRef
from rocketcluster.render import render_broker_conf, render_cluster, render_nameserver_conf
from rocketcluster.render_security import (
    AUTH_FILE,
    CREDENTIALS_DIR,
    STATEFUL_STRATEGY,
    TLS_DIR,
    auth_properties,
    render_certificate,
    render_operator_secret,
    secrets_hash,
    tls_secret_name,
)

CLUSTER = ClusterRef("demo", "mq", "uid-1")
AUTH = {"authentication": {"enabled": True}, "authorization": {"enabled": True}}
TLS = {"tls": {"enabled": True, "secretName": "demo-cert"}}


def _spec(security: dict[str, Any] | None = None, **raw: Any) -> Any:
    return parse_spec({"security": security or {}, **raw})


def _by(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)


@pytest.mark.parametrize(
    ("security", "path", "words"),
    [
        ({"authorization": {"enabled": True}}, "spec.security", "needs authentication.enabled"),
        ({"tls": {"enabled": True}}, "spec.security.tls", "needs secretName or issuerRef"),
        ({"tls": {"secretName": "a", "issuerRef": {"name": "b"}}}, "spec.security.tls", "not both"),
        ({"authentication": {"enabled": "true"}}, "spec.security.authentication.enabled", "valid boolean"),
        ({"authentication": True}, "spec.security.authentication", "got bool"),
        ({"tls": {"enabled": True, "secretName": "Not_A_Name"}}, "spec.security.tls.secretName", "pattern"),
        ({"tls": {"enabled": True, "secretName": "x" * 300}}, "spec.security.tls.secretName", "at most 253"),
        ({"tls": {"enabled": True, "issuerRef": {"name": "ca", "kind": "Vault"}}}, "issuerRef.kind", "Issuer"),
        ({"tls": {"enabled": True, "issuerRef": {}}}, "spec.security.tls.issuerRef.name", "Field required"),
        ({"tls": {"enabled": True, "secretName": "a", "password": "x"}}, "spec.security.tls.password", "unknown"),
        ({"users": []}, "spec.security.users", "unknown field"),
    ],
)
def test_hostile_security_specs_are_refused_naming_the_field(security: Any, path: str, words: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec({"security": security})
    assert any(p.endswith(path) or path in p for p, _ in caught.value.problems), caught.value.problems
    assert words in str(caught.value)


@pytest.mark.parametrize(
    "key",
    [
        "authenticationEnabled",
        "authorizationEnabled",
        "initAuthenticationUser",
        "innerClientAuthenticationCredentials",
        "tls.server.mode",
        "tls.server.certPath",
        "tls.enable",
    ],
)
def test_security_keys_in_broker_config_are_refused(key: str) -> None:
    with pytest.raises(SpecError, match=f"key '{key}' is owned by the operator"):
        parse_spec({"broker": {"config": {key: "true"}}})


def test_security_off_changes_nothing() -> None:
    plain = render_cluster(CLUSTER, _spec())
    assert render_cluster(CLUSTER, parse_spec({})) == plain
    for obj in plain:
        text = json.dumps(obj)
        assert "credentials" not in text and "tls" not in text.lower().replace("tolerations", "")


@pytest.mark.parametrize(
    ("security", "broker_keys", "namesrv_keys"),
    [
        (
            {"authentication": {"enabled": True}},
            {"authenticationEnabled": "true", "authorizationEnabled": "false"},
            {"authenticationEnabled": "true"},
        ),
        (AUTH, {"authenticationEnabled": "true", "authorizationEnabled": "true"}, {"authenticationEnabled": "true"}),
        (
            TLS,
            {
                "tls.server.mode": "enforcing",
                "tls.server.certPath": f"{TLS_DIR}/tls.crt",
                "tls.server.keyPath": f"{TLS_DIR}/tls.key",
                "tls.test.mode.enable": "false",
                "tls.enable": "true",
            },
            {
                "tls.server.mode": "enforcing",
                "tls.server.certPath": f"{TLS_DIR}/tls.crt",
                "tls.server.keyPath": f"{TLS_DIR}/tls.key",
                "tls.test.mode.enable": "false",
            },
        ),
    ],
)
def test_the_config_maps_hold_the_keys_but_no_secret(
    security: dict[str, Any], broker_keys: dict[str, str], namesrv_keys: dict[str, str]
) -> None:
    spec = _spec(security)
    broker = parse_properties(render_broker_conf(CLUSTER, spec, 0, 0))
    namesrv = parse_properties(render_nameserver_conf(spec))
    assert {k: broker[k] for k in broker_keys} == broker_keys
    assert {k: namesrv[k] for k in namesrv_keys} == namesrv_keys
    for obj in render_cluster(CLUSTER, spec):
        if obj["kind"] == "ConfigMap":
            text = json.dumps(obj["data"])
            assert "initAuthenticationUser" not in text and "innerClientAuthentication" not in text


@pytest.mark.parametrize(
    ("security", "config", "strategy"),
    [
        (AUTH | TLS, {}, STATEFUL_STRATEGY),  # TLS vouches for the connection: one signature checked per user
        ({"authentication": {"enabled": True}} | TLS, {}, STATEFUL_STRATEGY),
        (AUTH, {}, None),  # plaintext: every request keeps its own signature check (the broker's default)
        (TLS, {}, None),  # nothing to check
        (
            AUTH | TLS,
            {"authenticationStrategy": STATELESS_AUTHENTICATION},
            STATELESS_AUTHENTICATION,
        ),  # the user's choice wins
        (AUTH, {"authenticationStrategy": STATEFUL_STRATEGY}, STATEFUL_STRATEGY),
    ],
)
def test_authentication_over_tls_trusts_a_checked_connection_unless_the_config_says_otherwise(
    security: dict[str, Any], config: dict[str, str], strategy: str | None
) -> None:
    spec = _spec(security, broker={"config": config})
    rendered = parse_properties(render_broker_conf(CLUSTER, spec, 0, 0))
    assert rendered.get("authenticationStrategy") == strategy
    assert parse_stateful(rendered.get("authenticationStrategy", "")) == (strategy == STATEFUL_STRATEGY)


def test_the_merged_files_load_in_the_broker_and_the_nameserver(tmp_path: Path) -> None:
    """What the start command builds: the ConfigMap's file, then the Secret's auth.properties."""
    spec = _spec(AUTH)
    auth = auth_properties("rocketcluster-operator", "k3y-with_url-safe")
    broker = load_broker_config(parse_properties(render_broker_conf(CLUSTER, spec, 0, 1) + auth))
    assert broker.broker.authentication_enabled and broker.broker.authorization_enabled
    inner = json.loads(broker.broker.inner_client_authentication_credentials)
    assert inner == {"accessKey": "rocketcluster-operator", "secretKey": "k3y-with_url-safe"}
    assert json.loads(broker.broker.init_authentication_user)["password"] == "k3y-with_url-safe"
    namesrv_props = parse_properties(render_nameserver_conf(spec) + auth)
    namesrv_props["kvConfigPath"] = str(tmp_path / "kv.json")
    namesrv = NamesrvConfig.from_properties(namesrv_props)
    assert namesrv.authentication_enabled
    assert json.loads(namesrv.inner_client_authentication_credentials.get_secret_value())["secretKey"] == (
        "k3y-with_url-safe"
    )


def test_the_start_command_merges_in_a_real_shell(tmp_path: Path) -> None:
    """The broker container's `sh -c` script, run by /bin/sh with the paths moved under tmp_path."""
    spec = _spec(AUTH)
    sts = _by(render_cluster(CLUSTER, spec), "StatefulSet", "demo-broker-0")
    command = sts["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[:2] == ["sh", "-c"]
    config_dir, creds, tmp = tmp_path / "etc", tmp_path / "creds", tmp_path / "tmp"
    for d in (config_dir, creds, tmp):
        d.mkdir()
    (config_dir / "broker-1.conf").write_text(render_broker_conf(CLUSTER, spec, 0, 1))
    (creds / AUTH_FILE).write_text(auth_properties("op", "pw"))
    script = (
        command[2]
        .replace("'/tmp/", f"'{tmp}/")
        .replace("$(POD_INDEX)", "1")  # Kubernetes' expansion
        .replace(f"'{names.BROKER_CONFIG_DIR}/", f"'{config_dir}/")
        .replace(f"'{CREDENTIALS_DIR}/", f"'{creds}/")
        .replace("exec mqbroker", "exec echo")
    )
    out = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, check=True).stdout
    assert out == f"-c {tmp}/broker-1.conf\n"
    merged = tmp / "broker-1.conf"
    assert merged.stat().st_mode & 0o077 == 0  # umask 077: only the broker's user reads it
    props = parse_properties(merged.read_text())
    assert props["brokerId"] == "1" and json.loads(props["innerClientAuthenticationCredentials"])["secretKey"] == "pw"


def test_the_pods_mount_the_secrets_sign_their_probes_and_carry_the_hash() -> None:
    spec = _spec({**AUTH, **TLS})
    objects = render_cluster(ClusterRef("demo", "mq", "uid-1", "hash-1"), spec)
    for name, program in (("demo-broker-0", "mqbroker"), ("demo-nameserver", "mqnamesrv")):
        pod = _by(objects, "StatefulSet", name)["spec"]["template"]
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        assert volumes["credentials"]["secret"] == {"secretName": "demo-operator-credentials", "defaultMode": 0o440}
        assert volumes["tls"]["secret"] == {"secretName": "demo-cert", "defaultMode": 0o440}
        container = pod["spec"]["containers"][0]
        mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
        assert mounts[CREDENTIALS_DIR]["readOnly"] and mounts[TLS_DIR]["readOnly"]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert f"exec {program} -c '/tmp/" in container["command"][2]
        assert container["readinessProbe"]["exec"]["command"][-3:] == ["--credentials-dir", CREDENTIALS_DIR, "--tls"]
        assert pod["metadata"]["annotations"][names.ANNOTATION_SECRETS_HASH] == "hash-1"


def test_a_secret_change_changes_only_the_pod_annotation() -> None:
    spec = _spec(AUTH)
    before = render_cluster(ClusterRef("demo", "mq", "uid-1", "a"), spec)
    after = render_cluster(ClusterRef("demo", "mq", "uid-1", "b"), spec)
    changed = [(x["kind"], x["metadata"]["name"]) for x, y in zip(before, after, strict=True) if x != y]
    assert changed == [("StatefulSet", "demo-nameserver"), ("StatefulSet", "demo-broker-0")]
    old = _by(before, "StatefulSet", "demo-broker-0")["spec"]["template"]["metadata"]["annotations"]
    new = _by(after, "StatefulSet", "demo-broker-0")["spec"]["template"]["metadata"]["annotations"]
    assert old[names.ANNOTATION_CONFIG_HASH] == new[names.ANNOTATION_CONFIG_HASH]
    assert (old[names.ANNOTATION_SECRETS_HASH], new[names.ANNOTATION_SECRETS_HASH]) == ("a", "b")


def test_secrets_hash_covers_content_not_order() -> None:
    one = secrets_hash({"a": {"x": "1", "y": "2"}, "b": None})
    assert one == secrets_hash({"b": None, "a": {"y": "2", "x": "1"}})
    assert one != secrets_hash({"a": {"x": "1", "y": "3"}, "b": None})
    assert secrets_hash({"a": None}) == secrets_hash({"a": {}})


def test_the_operator_secret_and_its_auth_file() -> None:
    secret = render_operator_secret(CLUSTER, "Zx_9-random")
    assert secret["metadata"]["name"] == "demo-operator-credentials"
    assert secret["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    data = secret["stringData"]
    assert data["accessKey"] == "rocketcluster-operator" and data["secretKey"] == "Zx_9-random"
    props = parse_properties(data[AUTH_FILE])
    assert json.loads(props["initAuthenticationUser"]) == {
        "username": "rocketcluster-operator",
        "password": "Zx_9-random",
    }
    # a backslash survives the properties escaping
    assert (
        json.loads(parse_properties(auth_properties("a", "b\\c"))["innerClientAuthenticationCredentials"])["secretKey"]
        == "b\\c"
    )


def test_a_certificate_only_for_an_issuer() -> None:
    assert render_certificate(CLUSTER, _spec(TLS)) is None
    assert tls_secret_name("demo", _spec(TLS)) == "demo-cert"
    spec = _spec({"tls": {"enabled": True, "issuerRef": {"name": "ca", "kind": "ClusterIssuer"}}})
    certificate = render_certificate(CLUSTER, spec)
    assert certificate is not None and certificate in render_cluster(CLUSTER, spec)
    assert certificate["spec"]["secretName"] == tls_secret_name("demo", spec) == "demo-tls"
    assert certificate["spec"]["issuerRef"] == {"name": "ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}
    assert "*.demo-broker.mq.svc" in certificate["spec"]["dnsNames"]
    assert "demo-nameserver.mq.svc" in certificate["spec"]["dnsNames"]
    assert render_certificate(CLUSTER, _spec({"tls": {"enabled": False, "issuerRef": {"name": "ca"}}})) is None


@pytest.mark.parametrize(
    "external",
    [{"type": "NodePort", "nodePortBase": 30100}, {"type": "LoadBalancer"}],
    ids=["NodePort", "LoadBalancer"],
)
def test_security_composes_with_external_access(tmp_path: Path, external: dict[str, Any]) -> None:
    """spec.externalAccess rewrites the broker's probe (NodePort) or start command (LoadBalancer) as shell
    scripts: the credentials merge and the probe's flags still apply, and the script still runs."""
    spec = _spec(AUTH | TLS, externalAccess=external)
    sts = _by(render_cluster(CLUSTER, spec), "StatefulSet", "demo-broker-0")
    container = sts["spec"]["template"]["spec"]["containers"][0]
    probe = container["readinessProbe"]["exec"]["command"]
    assert " ".join(probe).endswith(f"--credentials-dir {CREDENTIALS_DIR} --tls")
    command = container["command"]
    assert command[:2] == ["sh", "-c"] and f"'{CREDENTIALS_DIR}/{AUTH_FILE}'" in command[2]
    assert command[2].count("exec mqbroker") == 1
    if external["type"] == "LoadBalancer":
        addresses, config_dir, creds, tmp = (tmp_path / d for d in ("addr", "etc", "creds", "tmp"))
        for d in (addresses, config_dir, creds, tmp):
            d.mkdir()
        (addresses / "demo-broker-0-0").write_text("203.0.113.7")
        (config_dir / "broker-0.conf").write_text(render_broker_conf(CLUSTER, spec, 0, 0))
        (creds / AUTH_FILE).write_text(auth_properties("op", "pw"))
        mount = next(
            m["mountPath"]
            for m in container["volumeMounts"]
            if m["mountPath"]
            not in (CREDENTIALS_DIR, TLS_DIR, "/tmp", "/home/rocketmq", names.BROKER_CONFIG_DIR, "/data")
        )
        script = (
            command[2]
            .replace("'/tmp/", f"'{tmp}/")
            .replace("$(POD_INDEX)", "0")
            .replace(f"{names.BROKER_CONFIG_DIR}/", f"{config_dir}/")
            .replace(f"'{CREDENTIALS_DIR}/", f"'{creds}/")
            .replace(mount, str(addresses))
            .replace("exec mqbroker", 'echo "$BROKER_IP1"; exec echo')
        )
        env = {"POD_NAME": "demo-broker-0-0", "PATH": "/usr/bin:/bin"}
        out = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, check=True, env=env).stdout
        assert out == f"203.0.113.7\n-c {tmp}/broker-0.conf\n"
        assert "innerClientAuthenticationCredentials" in (tmp / "broker-0.conf").read_text()
