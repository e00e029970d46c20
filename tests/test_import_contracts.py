"""The import-linter contracts (pyproject.toml [tool.importlinter]) hold, and fail on a broken copy.

`make lint` and `make test` run `lint-imports` on the checkout. These tests copy the two packages'
sources (`broker`, `operator/rocketcluster`) to a temporary directory, add one forbidden import to one
module, and run the real `lint-imports` against the copy with the project's own pyproject.toml: the
contracts that forbid that import (directly, or through the modules that import the changed one) must be
reported BROKEN, by name, and the others KEPT. The unchanged
copy passes, so each failure comes from the injected line alone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PYPROJECT = REPO / "pyproject.toml"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"

CONTRACTS = [c["name"] for c in tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]]
(
    BROKER_LAYERS,
    ASSEMBLY_ENTRY_ONLY,
    SDK_LAYERS,
    SDK_FORBIDDEN,
    OPERATOR_FORBIDDEN,
    BROKER_NOT_OPERATOR,
    SDK_WITHOUT_ADMIN,
) = CONTRACTS


def _copy_sources(dest: Path) -> Path:
    """`broker` and `operator/rocketcluster`, .py files only, under `dest`; returns the copy's root."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so")
    shutil.copytree(REPO / "broker", dest / "broker", ignore=ignore)
    shutil.copytree(REPO / "operator" / "rocketcluster", dest / "operator" / "rocketcluster", ignore=ignore)
    shutil.copy(PYPROJECT, dest / "pyproject.toml")
    return dest


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    # The copy first on the path, so the installed (editable) packages are not the ones analysed.
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{root / 'operator'}"}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo", str(root / "pyproject.toml")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _verdicts(out: str) -> dict[str, str]:
    verdicts = {}
    for name in CONTRACTS:
        for line in out.splitlines():
            if line.startswith(name + " "):
                verdicts[name] = line[len(name) + 1 :].strip()
    return verdicts


def test_the_checkout_keeps_every_contract() -> None:
    result = subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert _verdicts(result.stdout) == dict.fromkeys(CONTRACTS, "KEPT")


# (module of the copy that gets the line, the forbidden import, the contracts that must break). The SDK and
# the operator import the protocol and the client, so a protocol or client module that reaches the store or
# the server breaks their contracts too (an indirect import).
BREAKS = [
    ("broker/ha/master.py", "import broker.server.broker", {BROKER_LAYERS, ASSEMBLY_ENTRY_ONLY}),
    ("broker/store/checkpoint.py", "import broker.ha.controller", {BROKER_LAYERS}),
    ("broker/protocol/crc.py", "import broker.store.config", {BROKER_LAYERS, SDK_FORBIDDEN, OPERATOR_FORBIDDEN}),
    ("broker/transport/budget.py", "import broker.client.producer", {SDK_LAYERS}),
    ("broker/client/route.py", "import broker.server.topics", {SDK_FORBIDDEN, OPERATOR_FORBIDDEN}),
    ("operator/rocketcluster/plan.py", "import broker.store.config", {OPERATOR_FORBIDDEN}),
    ("broker/cli/probe.py", "import rocketcluster.names", {BROKER_NOT_OPERATOR}),
    # the controller sits below the NameServer that embeds it and the broker that registers with it
    ("broker/controller/state.py", "import broker.namesrv.route", {BROKER_LAYERS}),
    ("broker/auth/model.py", "import broker.controller.state", {BROKER_LAYERS}),
    ("broker/client/route.py", "import broker.controller.state", {SDK_FORBIDDEN}),
    # the metrics sit below the broker and the NameServer, beside auth, above HA and the store
    ("broker/metrics/broker_collector.py", "import broker.server.topics", {BROKER_LAYERS}),
    ("broker/metrics/namesrv_collector.py", "import broker.namesrv.controller", {BROKER_LAYERS}),
    ("broker/metrics/views.py", "import broker.auth.model", {BROKER_LAYERS}),
    ("broker/store/message_store.py", "import broker.metrics.views", {BROKER_LAYERS}),
    # a part of the broker that names the assembly, even for its types, instead of a Protocol
    ("broker/server/processors/admin.py", "from broker.server.broker import BrokerController", {ASSEMBLY_ENTRY_ONLY}),
    ("broker/server/transaction/service.py", "import broker.server.broker", {ASSEMBLY_ENTRY_ONLY}),
    # the producers and consumers leave the admin client out, also through the modules they share
    ("broker/client/push_consumer.py", "from broker.client.admin import Admin", {SDK_WITHOUT_ADMIN}),
    ("broker/client/route.py", "import broker.client.admin.lag", {SDK_WITHOUT_ADMIN}),
]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = _copy_sources(tmp_path_factory.mktemp("pristine"))
    result = _lint(root)
    assert result.returncode == 0, result.stdout + result.stderr
    assert _verdicts(result.stdout) == dict.fromkeys(CONTRACTS, "KEPT")
    return root


@pytest.mark.parametrize(("module", "line", "broken"), BREAKS, ids=[b[0] for b in BREAKS])
def test_a_forbidden_import_breaks_its_contract(
    pristine: Path, tmp_path: Path, module: str, line: str, broken: set[str]
) -> None:
    root = tmp_path / "copy"
    shutil.copytree(pristine, root)
    target = root / module
    target.write_text(target.read_text() + f"\n{line}  # injected by the test\n")
    result = _lint(root)
    assert result.returncode != 0, result.stdout
    expected = {name: "BROKEN" if name in broken else "KEPT" for name in CONTRACTS}
    assert _verdicts(result.stdout) == expected, result.stdout
    # the report names the importer and the imported module
    importer = module.removeprefix("operator/").removesuffix(".py").replace("/", ".")
    assert importer in result.stdout and line.split()[1] in result.stdout, result.stdout
