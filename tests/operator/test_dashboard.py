"""The Grafana dashboard the chart ships (charts/rocketcluster-operator/dashboards/rocketcluster.json).

No Grafana can be installed from the registries this project reaches (it is in no Debian archive here, on no
language registry, and its Go module is AGPL), so the dashboard is checked, not rendered:

- Structure, as Grafana's dashboard schema (the v1 dashboard kind; grafana-foundation-sdk publishes it as
  JSON schema) demands it: the keys each object may have (the schema sets additionalProperties false) and
  must have, known panel types, unique panel ids, gridPos inside the 24 columns without overlaps, targets
  with a unique refId and an expr, every datasource the `${datasource}` variable. The schema file itself is
  not vendored here; it was run once against the dashboard with `jsonschema` (docs/metrics.md says what it
  found), and the rules below are the ones that run found or that the schema states.
- Every metric name in every query and variable is one that is emitted: taken from real scrapes of a
  NameServer, a master and a slave with metricsExporterType=PROM after real sends and pulls, from the
  operator's registry, and from a short list of kube-state-metrics and kubelet names the pod and volume
  panels use (named in those panels' descriptions).
- Every query runs in a real Prometheus (Debian's `prometheus` package, installed by scripts/system-deps.sh)
  that scrapes those servers and the operator's registry with the labels Kubernetes discovery adds; each
  answers without error, with data unless it needs kube-state-metrics or the kubelet, and a few with the
  exact values the test made.
- The chart's ConfigMap carries the very file, as JSON (`helm template` when the e2e harness's helm is built).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import start_http_server
from prometheus_client.parser import text_string_to_metric_families

from broker.client import Admin, Message, Producer, PullConsumer, SendStatus
from broker.namesrv.config import NamesrvConfig
from broker.namesrv.controller import NamesrvController
from broker.server.broker import BrokerController
from broker.server.config import load_broker_config
from broker.transport.loop import run
from rocketcluster import metrics as operator_metrics
from tests.local_cluster import SMALL_INDEX, wait_for

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "rocketcluster-operator"
DASHBOARD = CHART / "dashboards" / "rocketcluster.json"
HELM = Path.home() / ".cache" / "rocketcluster" / "helm-v3.19.0" / "bin" / "helm"

# Names from outside RocketCluster, each used by a panel whose description names its source
KUBE_STATE_METRICS = {"kube_pod_status_ready", "kube_pod_container_status_restarts_total"}
KUBELET = {"kubelet_volume_stats_used_bytes", "kubelet_volume_stats_capacity_bytes"}
EXTERNAL = KUBE_STATE_METRICS | KUBELET

PANEL_TYPES = {"row", "timeseries", "stat"}  # the ones this dashboard uses, all core Grafana panels
# Keys the dashboard kind's schema allows (additionalProperties false) and requires
DASHBOARD_KEYS = {
    "id", "uid", "title", "description", "revision", "gnetId", "tags", "timezone", "editable", "graphTooltip",
    "time", "timepicker", "fiscalYearStartMonth", "liveNow", "weekStart", "refresh", "schemaVersion", "version",
    "panels", "templating", "annotations", "links", "snapshot", "preload",
}  # fmt: skip
DASHBOARD_REQUIRED = {"schemaVersion", "templating", "annotations"}
PANEL_KEYS = {
    "type", "id", "pluginVersion", "targets", "title", "description", "transparent", "datasource", "gridPos",
    "links", "repeat", "repeatDirection", "maxPerRow", "maxDataPoints", "transformations", "interval", "timeFrom",
    "timeShift", "hideTimeOverride", "libraryPanel", "cacheTimeout", "queryCachingTTL", "options", "fieldConfig",
}  # fmt: skip
ROW_KEYS = {"type", "collapsed", "title", "datasource", "gridPos", "id", "panels", "repeat"}
ROW_REQUIRED = {"type", "collapsed", "id", "panels"}
GRID_KEYS = {"h", "w", "x", "y", "static"}
VARIABLE_KEYS = {
    "type", "name", "label", "hide", "skipUrlSync", "description", "query", "datasource", "current", "multi",
    "options", "refresh", "sort", "includeAll", "allValue", "regex", "definition",
}  # fmt: skip
VARIABLE_TYPES = {"query", "adhoc", "groupby", "constant", "datasource", "interval", "textbox", "custom", "system"}
# the schema's FieldConfigSource needs both; its stat Options needs these (a Grafana 11 stat panel has them)
FIELD_CONFIG_REQUIRED = {"defaults", "overrides"}
STAT_OPTIONS_REQUIRED = {
    "graphMode", "colorMode", "justifyMode", "textMode", "wideLayout", "showPercentChange",
    "percentChangeColorMode", "reduceOptions", "orientation",
}  # fmt: skip
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}

# PromQL words that are not metric names
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool"}
PROMQL_WORDS |= {"offset", "inf", "nan"}


def _dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return data


def _panels(d: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, those inside collapsed rows included."""
    out = []
    for p in d["panels"]:
        out.append(p)
        out += p.get("panels", [])
    return out


def _queries(d: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, PromQL) of every target and every query variable."""
    for p in _panels(d):
        for t in p.get("targets", []):
            yield f"panel {p['title']!r} {t['refId']}", t["expr"]
    for v in d["templating"]["list"]:
        if v["type"] == "query":
            m = re.fullmatch(r"label_values\((.*), *(\w+)\)", v["query"], re.S)
            assert m, f"variable {v['name']}: not label_values(selector, label): {v['query']}"
            yield f"variable {v['name']}", m.group(1)


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: identifiers outside strings, label matchers, ranges and
    grouping clauses, not called as functions, plus the alternatives of a `__name__=~"a|b"` matcher."""
    names = set()
    for alternatives in re.findall(r'__name__\s*=~?\s*"([^"]*)"', expr):
        names |= set(alternatives.split("|"))
    rest = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    rest = re.sub(r"\{[^}]*\}", " ", rest)
    rest = re.sub(r"\[[^\]]*\]", " ", rest)
    rest = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", rest)
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", rest):
        word = m.group(0)
        if word.lower() in PROMQL_WORDS or rest[m.end() :].lstrip().startswith("("):
            continue
        names.add(word)
    return names


# ---------------------------------------------------------------------------------------------- structure


def test_dashboard_follows_grafanas_dashboard_schema() -> None:
    d = _dashboard()
    assert d["uid"] == "rocketcluster" and d["title"] == "RocketCluster"
    assert set(d) <= DASHBOARD_KEYS, set(d) - DASHBOARD_KEYS
    assert set(d) >= DASHBOARD_REQUIRED
    assert d["schemaVersion"] == 39  # Grafana 10.4/11 writes 39; an older Grafana would migrate it wrongly
    assert set(d["time"]) == {"from", "to"}

    panels = _panels(d)
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), f"panel ids repeat: {sorted(ids)}"
    cells: dict[tuple[int, int], str] = {}
    for p in panels:
        title = p.get("title", p["id"])
        assert p["type"] in PANEL_TYPES, f"{title}: unknown panel type {p['type']}"
        keys, required = (ROW_KEYS, ROW_REQUIRED) if p["type"] == "row" else (PANEL_KEYS, {"type"})
        assert set(p) <= keys, f"{title}: keys the schema does not allow: {set(p) - keys}"
        assert required <= set(p), f"{title}: missing {required - set(p)}"
        g = p["gridPos"]
        assert set(g) <= GRID_KEYS and {"h", "w", "x", "y"} <= set(g), f"{title}: gridPos {g}"
        assert g["w"] > 0 and g["h"] > 0 and g["x"] >= 0 and g["y"] >= 0, f"{title}: gridPos {g}"
        assert g["x"] + g["w"] <= 24, f"{title}: gridPos {g} goes past the 24 columns"
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{title} overlaps {cells[(x, y)]} at column {x}, row {y}"
                cells[(x, y)] = title
        if p["type"] == "row":
            assert g["w"] == 24 and g["h"] == 1 and not p["collapsed"], f"row {title}: {g}"
            continue
        assert p.get("title") and p.get("description"), f"panel {p['id']}: a title and a description"
        assert p["datasource"] == DATASOURCE, f"{title}: datasource {p['datasource']}"
        assert set(p["fieldConfig"]) >= FIELD_CONFIG_REQUIRED, f"{title}: fieldConfig {p['fieldConfig']}"
        if p["type"] == "stat":
            missing = STAT_OPTIONS_REQUIRED - set(p["options"])
            assert not missing, f"{title}: stat options miss {missing}"
        refs = [t["refId"] for t in p["targets"]]
        assert p["targets"] and len(refs) == len(set(refs)), f"{title}: refIds {refs}"
        for t in p["targets"]:
            assert t["datasource"] == DATASOURCE, f"{title} {t['refId']}: datasource {t['datasource']}"
            assert isinstance(t["expr"], str) and t["expr"].strip(), f"{title} {t['refId']}: no expr"
            assert t["expr"].count("(") == t["expr"].count(")"), f"{title}: unbalanced {t['expr']}"

    variables = {v["name"]: v for v in d["templating"]["list"]}
    for v in variables.values():
        assert set(v) <= VARIABLE_KEYS and v["type"] in VARIABLE_TYPES, v
        # the schema's query is a string or an object of objects: Prometheus's variables take the string
        assert v["type"] != "query" or isinstance(v["query"], str), v
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert {"namespace", "cluster"} <= set(variables)
    # every query is scoped by the two variables (the volume and pod panels through PVC and pod names)
    for where, expr in _queries(d):
        if where.startswith("panel") and "reconcile_duration" not in expr:  # the one histogram without labels
            assert "$cluster" in expr and "$namespace" in expr, f"{where}: not scoped to $namespace/$cluster"


def test_metric_name_extraction() -> None:
    expr = (
        'sum by (topic) (rate(a_total{x="b_c", y=~"$z"}[$__rate_interval])) / on (pod) group_left () '
        'histogram_quantile(0.99, c_bucket) and d or {__name__=~"e|f"}'
    )
    assert metric_names(expr) == {"a_total", "c_bucket", "d", "e", "f"}


# ---------------------------------------------------------------------------------------------- real servers

PROM = {"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": "0"}
CLUSTER = "dash"  # a RocketCluster named dash: brokerClusterName dash, pods dash-broker-0-N, dash-nameserver-0
NAMESPACE = "rc-test"
TOPIC = "DashTopic"
GROUP = "CG-dash"
SENT, CONSUMED = 12, 7  # the group reads and commits 7 of 12: a lag of 5, none in flight


def _broker_props(root: Path, namesrv_port: int, broker_id: int, role: str) -> dict[str, str]:
    return {
        "brokerClusterName": CLUSTER,
        "brokerName": f"{CLUSTER}-0",
        "brokerId": str(broker_id),
        "brokerRole": role,
        "listenPort": "0",
        "haListenPort": "0",
        "brokerIP1": "127.0.0.1",
        "storePathRootDir": str(root),
        "mappedFileSizeCommitLog": str(1 << 20),
        "namesrvAddr": f"127.0.0.1:{namesrv_port}",
        "haSendHeartbeatInterval": "500",
        "slaveSyncInterval": "300",
        "flushConsumerOffsetInterval": "200",
        "diskMaxUsedSpaceRatio": "95",
        **SMALL_INDEX,
        **PROM,
    }


async def _http(port: int, path: str = "/metrics") -> str:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n".encode())
        raw = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    return body.decode()


class Servers:
    """A NameServer, a SYNC_MASTER and its slave of one broker group, all serving /metrics, after sends and
    pulls: `ports` maps each to its metrics port, keyed by the pod name it would have."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.namesrv: NamesrvController | None = None
        self.brokers: list[BrokerController] = []
        self.ports: dict[str, int] = {}

    async def start(self) -> None:
        props = {"listenPort": "0", "kvConfigPath": str(self.root / "kv.json"), **PROM}
        self.namesrv = NamesrvController(NamesrvConfig.from_properties(props))
        await self.namesrv.start()
        assert self.namesrv.metrics is not None
        self.ports[f"{CLUSTER}-nameserver-0"] = self.namesrv.metrics.port
        for broker_id, role in ((0, "SYNC_MASTER"), (1, "SLAVE")):
            props = _broker_props(self.root / f"store-{broker_id}", self.namesrv.port, broker_id, role)
            broker = BrokerController(load_broker_config(props))
            await broker.start()
            self.brokers.append(broker)
            assert broker.metrics is not None
            self.ports[f"{CLUSTER}-broker-0-{broker_id}"] = broker.metrics.port
        master = self.brokers[0]
        assert master.ha is not None and master.ha.master is not None
        ha = master.ha.master
        await wait_for(lambda: ha.slave_count == 1, 20, "the slave to connect")

    async def traffic(self) -> None:
        addr = f"127.0.0.1:{self.namesrv.port}"  # type: ignore[union-attr]
        async with Admin(addr) as admin:
            await admin.create_topic(TOPIC, read_queue_nums=1, write_queue_nums=1)
            for _ in range(200):
                if TOPIC in await admin.topic_list():
                    break
                await asyncio.sleep(0.05)
            # one answer that is not success, for the panel of those: the NameServer knows no such topic
            with pytest.raises(Exception, match=r"(?i)topic"):
                await admin.topic_route("NoSuchTopic")
        async with Producer("PG-dash", addr) as producer:
            for i in range(SENT):
                if i == CONSUMED:
                    # the group reads and commits what was sent so far and leaves: the rest is its lag
                    consumer = PullConsumer(GROUP, addr, consume_from_where=4, auto_commit=False)
                    consumer.subscribe(TOPIC, "*")
                    async with consumer:
                        got = 0
                        while got < CONSUMED:
                            got += len(await consumer.poll(1.0))
                        await consumer.commit()
                result = await producer.send(Message(TOPIC, f"m{i}".encode() * 50))
                assert result.status is SendStatus.SEND_OK
        master = self.brokers[0]
        await wait_for(lambda: master.store.dispatch_behind_bytes == 0, 10, "dispatch to catch up")

    async def scrape_names(self) -> set[str]:
        names = set()
        for port in self.ports.values():
            for family in text_string_to_metric_families(await _http(port)):
                names |= {s.name for s in family.samples}
        return names

    async def stop(self) -> None:
        for b in reversed(self.brokers):
            await b.shutdown()
        if self.namesrv is not None:
            await self.namesrv.shutdown()


def _operator_names() -> set[str]:
    """The series names the operator's registry writes (a counter's _total, a histogram's _bucket ...)."""
    names = set()
    for family in operator_metrics.REGISTRY.collect():
        if family.type == "counter":
            names.add(f"{family.name}_total")
        elif family.type == "histogram":
            names |= {f"{family.name}_{suffix}" for suffix in ("bucket", "count", "sum")}
        else:
            names.add(family.name)
    return names


def test_every_metric_name_is_emitted(tmp_path: Path) -> None:
    async def main() -> set[str]:
        servers = Servers(tmp_path)
        try:
            await servers.start()
            await servers.traffic()
            return await servers.scrape_names()
        finally:
            await servers.stop()

    emitted = run(main()) | _operator_names() | EXTERNAL
    used: dict[str, set[str]] = {}
    for where, expr in _queries(_dashboard()):
        names = metric_names(expr)
        assert names, f"{where}: no metric in {expr}"
        for name in names:
            used.setdefault(name, set()).add(where)
    unknown = {name: sorted(where) for name, where in used.items() if name not in emitted}
    assert not unknown, f"metrics nothing emits: {unknown}"
    # the brief's subjects each have their metric on the dashboard
    for name in (
        "rocketmq_messages_in_total",
        "rocketmq_messages_out_total",
        "rocketmq_rpc_latency_bucket",
        "rocketmq_consumer_lag_messages",
        "rocketmq_replication_lag_bytes",
        "rocketmq_storage_size",
        "kube_pod_status_ready",
        "rocketcluster_cluster_phase",
    ):
        assert name in used, name


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _prometheus_config(servers: Servers, operator_port: int) -> str:
    """Scrape jobs with the labels Kubernetes pod discovery gives (namespace, pod). The operator is scraped
    twice: as the pod annotations' job does (honor_labels: its `namespace` label wins) and as a
    ServiceMonitor does by default (Prometheus's namespace wins, the operator's becomes exported_namespace)."""
    targets = [
        {"targets": [f"127.0.0.1:{port}"], "labels": {"namespace": NAMESPACE, "pod": pod}}
        for pod, port in servers.ports.items()
    ]
    operator_pod = {"pod": "rocketcluster-operator-0"}
    operator: list[dict[str, Any]] = [{"targets": [f"127.0.0.1:{operator_port}"], "labels": operator_pod}]
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [
            {"job_name": "rocketcluster", "static_configs": targets},
            {"job_name": "operator-annotations", "honor_labels": True, "static_configs": operator},
            {
                "job_name": "operator-servicemonitor",
                "static_configs": [{**operator[0], "labels": {**operator_pod, "namespace": "operators"}}],
            },
        ],
    }
    return json.dumps(config)  # YAML is a superset of JSON


def _query(base: str, expr: str) -> list[dict[str, Any]]:
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
    except urllib.error.HTTPError as exc:
        raise AssertionError(f"Prometheus refused {expr}: {exc.read().decode()}") from exc
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def _substitute(expr: str) -> str:
    """Grafana's variables as Grafana would put them in: one namespace and cluster, All for topic and group."""
    for name, value in (
        ("$__rate_interval", "15s"),
        ("$namespace", NAMESPACE),
        ("$cluster", CLUSTER),
        ("$topic", ".*"),
        ("$group", ".*"),
    ):
        expr = expr.replace(name, value)
    assert "$" not in expr, expr
    return expr


@pytest.mark.skipif(shutil.which("prometheus") is None, reason="no prometheus (scripts/system-deps.sh installs it)")
def test_every_query_answers_in_a_real_prometheus(tmp_path: Path) -> None:
    d = _dashboard()
    ns, cluster = NAMESPACE, CLUSTER
    operator_metrics.status_written(ns, cluster, {"phase": "Ready", "groups": 1, "readyGroups": 1})
    operator_metrics.pass_finished(ns, cluster, "ok", 0.05)
    operator_metrics.pass_finished(ns, cluster, "error", 0.2)
    operator_metrics.action_taken(ns, cluster, "ScaleOut")
    server, thread = start_http_server(0, addr="127.0.0.1", registry=operator_metrics.REGISTRY)
    prom_port = _free_port()
    base = f"http://127.0.0.1:{prom_port}"

    async def main() -> dict[str, list[dict[str, Any]]]:
        servers = Servers(tmp_path)
        prometheus: asyncio.subprocess.Process | None = None
        try:
            await servers.start()
            await servers.traffic()
            (tmp_path / "prometheus.yml").write_text(_prometheus_config(servers, server.server_port))
            log = open(tmp_path / "prometheus.log", "wb")  # noqa: SIM115  # closed with the process below
            prometheus = await asyncio.create_subprocess_exec(
                "prometheus",
                f"--config.file={tmp_path / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
                stdout=log,
                stderr=subprocess.STDOUT,
            )

            def scraped() -> bool:
                up = _query(base, "sum(count_over_time(up[1m]) >= 4) by (job)")
                return len(up) == 3  # each job scraped at least four times: a rate over 15s has points

            deadline = time.monotonic() + 60
            while True:
                try:
                    ready = await asyncio.to_thread(scraped)
                except OSError:
                    ready = False
                if ready:
                    break
                assert time.monotonic() < deadline, (tmp_path / "prometheus.log").read_text()[-3000:]
                await asyncio.sleep(0.5)
            down = await asyncio.to_thread(_query, base, "up == 0")
            assert not down, f"targets down: {down}"
            answers = {}
            for where, expr in _queries(d):
                if where.startswith("variable"):
                    expr = _substitute(expr)
                    answers[where] = await asyncio.to_thread(_query, base, f"group by (__name__) ({expr})")
                else:
                    answers[where] = await asyncio.to_thread(_query, base, _substitute(expr))
            return answers
        finally:
            if prometheus is not None:
                prometheus.terminate()
                await prometheus.wait()
            await servers.stop()

    try:
        answers = run(main())
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
        operator_metrics.forget(ns, cluster)

    empty = [where for where, result in answers.items() if not result]
    externals = [where for where, expr in _queries(d) if metric_names(expr) & EXTERNAL]
    assert sorted(empty) == sorted(externals), f"queries without data: {empty}"

    def values(title: str, ref: str = "A") -> dict[str, float]:
        return {
            json.dumps(r["metric"], sort_keys=True): float(r["value"][1]) for r in answers[f"panel {title!r} {ref}"]
        }

    assert list(values("Cluster phase")) == ['{"phase": "Ready"}']
    assert values("Consumer lag") == {"{}": SENT - CONSUMED}
    lag = {"consumer_group": GROUP, "topic": TOPIC}
    assert values("Consumer lag by group") == {json.dumps(lag, sort_keys=True): SENT - CONSUMED}
    assert values("Ready messages by group") == {json.dumps(lag, sort_keys=True): SENT - CONSUMED}
    assert values("In-flight messages by group") == {json.dumps(lag, sort_keys=True): 0}
    assert list(values("Slaves connected per master").values()) == [1]
    assert values("Brokers in the route table") == {"{}": 2}
    errors = values("Reconcile errors")
    assert len(errors) == 1 and next(iter(errors.values())) == 0  # counted once before the window: no rate
    # the operator counted in both scrape jobs is one series per job, not a doubled one per job
    assert len(answers["panel 'Reconcile passes by result' A"]) == 2  # ok, error


# ---------------------------------------------------------------------------------------------- the chart


def test_chart_configmap_carries_the_dashboard(tmp_path: Path) -> None:
    template = (CHART / "templates" / "grafana-dashboard.yaml").read_text(encoding="utf-8")
    assert '.Files.Get "dashboards/rocketcluster.json"' in template
    if not os.access(HELM, os.X_OK):
        pytest.skip(f"no helm at {HELM} (the e2e harness builds it); the template names the file")
    yaml = pytest.importorskip("yaml", reason="PyYAML comes with the `operator` extra")
    env = {**os.environ, "HOME": str(tmp_path), "HELM_CACHE_HOME": str(tmp_path / "c")}
    env |= {"HELM_CONFIG_HOME": str(tmp_path / "cf"), "HELM_DATA_HOME": str(tmp_path / "d")}
    out = subprocess.run(
        [str(HELM), "template", "rc", str(CHART), "--kube-version", "1.34.4", "--set", "grafanaDashboard.enabled=true"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    ).stdout
    maps = [doc for doc in yaml.safe_load_all(out) if doc and doc["kind"] == "ConfigMap"]
    dashboards = [m for m in maps if "rocketcluster.json" in m.get("data", {})]
    assert len(dashboards) == 1, [m["metadata"]["name"] for m in maps]
    assert dashboards[0]["metadata"]["labels"]["grafana_dashboard"] == "1"  # what Grafana's sidecar looks for
    assert json.loads(dashboards[0]["data"]["rocketcluster.json"]) == _dashboard()
