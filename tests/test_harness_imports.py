"""Harness modules are imported by their package path, never by a bare top-level name.

tests/ and e2e/ are packages, so pytest puts the repo root on sys.path and a test module writes
`from tests.local_cluster import ...` or `from e2e.spark_harness import ...`. A bare
`from local_cluster import ...` would only work while pytest also put that test's own directory on
sys.path, and two harnesses share a name (tests/spark/spark_harness.py and e2e/spark_harness.py). The
files are read as text, not parsed, so the scripts tests run in a child process (`python -c` strings)
are checked too.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOPS = ("tests", "e2e")
# Files run on their own, by another interpreter or inside an image; they import nothing of ours.
STANDALONE_DIRS = {REPO / "tests" / "peers" / "py"}
SCANNED = (*TOPS, "bench")


def _python_files(top: str) -> list[Path]:
    return [p for p in sorted((REPO / top).rglob("*.py")) if "__pycache__" not in p.parts]


def bare_names() -> dict[str, str]:
    """Each importable module or package under tests/ and e2e/ by its last name -> its package path;
    names that are also standard-library modules (tests/operator) are left out."""
    names: dict[str, str] = {}
    for top in TOPS:
        for path in _python_files(top):
            if path.parent in STANDALONE_DIRS:
                continue
            parts = path.relative_to(REPO).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if len(parts) > 1 and parts[-1] not in sys.stdlib_module_names:
                names.setdefault(parts[-1], ".".join(parts))
    return names


def bare_imports(text: str, names: dict[str, str]) -> list[str]:
    """The lines of `text` that import one of `names` as a top-level module."""
    alternatives = "|".join(sorted(map(re.escape, names)))
    pattern = re.compile(rf"^\s*(?:from\s+(?:{alternatives})(?:\.|\s+import\b)|import\s+(?:{alternatives})\b)", re.M)
    return [match.group(0).strip() for match in pattern.finditer(text)]


def test_every_directory_of_test_code_is_a_package() -> None:
    missing = [
        str(d.relative_to(REPO))
        for top in TOPS
        for d in sorted({p.parent for p in _python_files(top)})
        if d not in STANDALONE_DIRS and not (d / "__init__.py").exists()
    ]
    assert missing == [], f"add an __init__.py to: {missing}"


def test_no_module_imports_a_harness_by_its_bare_name() -> None:
    names = bare_names()
    assert {"local_cluster", "server_harness", "spark_harness", "conftest", "peers", "crash_child"} <= names.keys()
    problems = [
        f"{path.relative_to(REPO)}: {line}"
        for top in SCANNED
        for path in _python_files(top)
        for line in bare_imports(path.read_text(), names)
    ]
    assert problems == [], "import these by their package path (tests.X, e2e.X):\n" + "\n".join(problems)


def test_the_check_sees_bare_imports_and_passes_package_paths() -> None:
    names = bare_names()
    bad = (
        "from local_cluster import LocalCluster\n"
        "    from conftest import Kube\n"
        "import interop_harness\n"
        "from peers.py import x\n"
        '        from store_helpers import message  # inside a "python -c" script\n'
    )
    assert len(bare_imports(bad, names)) == 5
    good = (
        "from tests.local_cluster import LocalCluster\n"
        "from e2e.conftest import Kube\n"
        "from tests.interop import interop_harness\n"
        "import operator\n"
        "from local_clusters import x\n"
        "# the harness, local_cluster, imports nothing\n"
    )
    assert bare_imports(good, names) == []
