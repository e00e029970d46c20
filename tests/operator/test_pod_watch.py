"""The operator's pod watch (operator/rocketcluster/pod_watch.py) asks the API server for the clusters' pods
only, and survives the ways a watch ends.

A real HTTP/1.1 server on loopback stands in for the API server (a real one cannot be made to answer 410 Gone
or a garbled line on cue): it records each request line, answers the list, and streams watch events, chunked,
as the API server does.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs, urlsplit

import kopf
import pytest

from rocketcluster.kube import Kube
from rocketcluster.main import watched_namespaces
from rocketcluster.pod_watch import SELECTOR, watch_paths, watch_pods


def _pod(ns: str, cluster: str, version: str) -> dict[str, Any]:
    labels = {"app.kubernetes.io/managed-by": "rocketcluster-operator", "rocketcluster.io/cluster": cluster}
    return {"metadata": {"namespace": ns, "name": f"{cluster}-0", "labels": labels, "resourceVersion": version}}


# What the fake server answers, in order: a list, then watches (each a list of raw lines, then end of stream)
SCRIPT: list[Any] = [
    {"kind": "PodList", "metadata": {"resourceVersion": "10"}, "items": [_pod("a", "c1", "9")]},
    [
        json.dumps({"type": "ADDED", "object": _pod("a", "c2", "11")}),
        json.dumps({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "12"}}}),
        "{garbled",  # the watch is started again from the last version seen
    ],
    [json.dumps({"type": "MODIFIED", "object": _pod("b", "c3", "13")})],  # the server ends the watch
    [json.dumps({"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}})],
    {"kind": "PodList", "metadata": {"resourceVersion": "20"}, "items": [_pod("a", "c1", "19")]},
    [json.dumps({"type": "DELETED", "object": _pod("a", "c4", "21")})],
]


@asynccontextmanager
async def api_server() -> AsyncIterator[tuple[str, list[str]]]:
    targets: list[str] = []
    answers = iter(SCRIPT)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                targets.append(head.decode().split("\r\n")[0].split(" ")[1])
                answer = next(answers, None)
                if answer is None:
                    await asyncio.sleep(3600)  # a watch with nothing to say
                if isinstance(answer, dict):
                    body = json.dumps(answer).encode()
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
                    await writer.drain()
                    continue
                writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                for line in answer:
                    data = (line + "\n").encode()
                    writer.write(b"%x\r\n%s\r\n" % (len(data), data))
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", targets
    finally:
        server.close()


async def test_the_watch_asks_for_the_clusters_pods_only_and_resumes() -> None:
    seen: list[tuple[str, str]] = []

    def on_pod(namespace: str, labels: Any) -> None:
        seen.append((namespace, labels["rocketcluster.io/cluster"]))

    async with api_server() as (url, targets):
        kube = Kube(kopf.ConnectionInfo(server=url))
        task = asyncio.create_task(watch_pods(kube, "/api/v1/pods", None, on_pod))
        try:
            async with asyncio.timeout(20):
                while len(seen) < 5:
                    await asyncio.sleep(0.05)
        finally:
            task.cancel()
            await kube.close()
    # listed, added, modified (after the garbled line), listed again (after 410 Gone), deleted
    assert seen == [("a", "c1"), ("a", "c2"), ("b", "c3"), ("a", "c1"), ("a", "c4")]
    queries = [parse_qs(urlsplit(t).query) for t in targets]
    assert all(q["labelSelector"] == [SELECTOR] for q in queries), targets  # never every pod of the cluster
    assert SELECTOR == "app.kubernetes.io/managed-by=rocketcluster-operator,rocketcluster.io/cluster"
    watches = [q for q in queries if q.get("watch") == ["true"]]
    # resumed from the last version seen: the bookmark's after the garbled line, then a re-list after 410
    assert [w["resourceVersion"] for w in watches[:4]] == [["10"], ["12"], ["13"], ["20"]]
    assert "watch" not in queries[0] and "watch" not in queries[4]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], None),
        (["--standalone", "--all-namespaces"], None),
        (["-A"], None),
        (["--namespace", "a", "-n", "b"], ["a", "b"]),
        (["--namespace=a", "--liveness=http://x"], ["a"]),
        (["--namespace"], None),  # kopf refuses that; nothing to watch here either
    ],
)
def test_watched_namespaces(argv: list[str], expected: list[str] | None) -> None:
    assert watched_namespaces(argv) == expected


@pytest.mark.parametrize(
    ("namespaces", "paths"),
    [
        (None, [("/api/v1/pods", None)]),
        (["a", "b"], [("/api/v1/namespaces/a/pods", None), ("/api/v1/namespaces/b/pods", None)]),
        (["team-*", "!team-x"], [("/api/v1/pods", ["team-*", "!team-x"])]),
    ],
)
def test_watch_paths(namespaces: list[str] | None, paths: list[tuple[str, list[str] | None]]) -> None:
    assert watch_paths(namespaces) == paths


async def test_a_pattern_watch_reports_only_the_namespaces_it_names() -> None:
    seen: list[str] = []
    async with api_server() as (url, _targets):
        kube = Kube(kopf.ConnectionInfo(server=url))
        task = asyncio.create_task(watch_pods(kube, "/api/v1/pods", ["a*", "!b"], lambda ns, _: seen.append(ns)))
        try:
            async with asyncio.timeout(20):
                while len(seen) < 4:
                    await asyncio.sleep(0.05)
        finally:
            task.cancel()
            await kube.close()
    assert "b" not in seen and set(seen) == {"a"}
