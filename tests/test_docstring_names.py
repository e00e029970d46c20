"""Docstrings name only functions that exist: a renamed or removed function must take its mentions along.

Reads the sources of the `broker` and `rocketcluster` packages with `ast` (nothing is imported, so the
operator's kopf is not needed) and checks two precise forms in docstrings:

- a backticked call, `name()` or `owner.name()`: `name` must be defined in the packages (a def, a class,
  a module or class attribute, or a parameter: a docstring may name the callable it is given). A dotted
  call is only checked when `owner` is one of our classes or self/cls: `loop.call_soon()` is not (a
  module is named by its full path, below). Java names (`checkFields()`) are not snake_case: left alone.
- a backticked module path, `broker.store.dispatch_request.parse_record`: the module must exist and define the
  name that follows it.
"""

from __future__ import annotations

import ast
import builtins
import re
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = {"broker": REPO / "broker", "rocketcluster": REPO / "operator" / "rocketcluster"}

_CALL = re.compile(r"`(?:([A-Za-z_]\w*)\.)*([a-z_][a-z0-9_]*)\(\)`")
_MODULE_PATH = re.compile(r"`((?:broker|rocketcluster)(?:\.[A-Za-z_]\w*)+)(?:\(\))?`")


@dataclass
class Package:
    """What the packages define: every name anywhere, the class names, and the top-level names of each
    module by dotted path."""

    defined: set[str] = field(default_factory=set)
    owners: set[str] = field(default_factory=lambda: {"self", "cls"})
    modules: dict[str, set[str]] = field(default_factory=dict)
    docstrings: list[tuple[str, int, str]] = field(default_factory=list)


def _top_level(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return names


def _read(tree: ast.Module, pkg: Package, where: str) -> None:
    scopes: list[ast.Module | ast.ClassDef] = [tree]
    for sub in ast.walk(tree):
        if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            pkg.defined.add(sub.name)
            if isinstance(sub, ast.ClassDef):
                pkg.owners.add(sub.name)
                scopes.append(sub)
            else:
                args = sub.args
                pkg.defined |= {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
        elif isinstance(sub, ast.Assign | ast.AnnAssign):  # attributes set anywhere (self.x = ...)
            targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
            pkg.defined |= {t.attr for t in targets if isinstance(t, ast.Attribute)}
        if isinstance(sub, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            doc = ast.get_docstring(sub, clean=False)
            if doc:
                pkg.docstrings.append((where, getattr(sub, "lineno", 1), doc))
    for scope in scopes:  # names assigned in a module or class body (not a function's locals)
        for stmt in scope.body:
            targets = (
                stmt.targets
                if isinstance(stmt, ast.Assign)
                else [stmt.target]
                if isinstance(stmt, ast.AnnAssign)
                else []
            )
            pkg.defined |= {t.id for t in targets if isinstance(t, ast.Name)}


def load_packages() -> Package:
    pkg = Package()
    for name, root in PACKAGES.items():
        for path in sorted(root.rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            parts = [name, *path.relative_to(root).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            pkg.modules[".".join(parts)] = _top_level(tree)
            _read(tree, pkg, str(path.relative_to(REPO)))
    return pkg


def unknown_names(doc: str, pkg: Package) -> list[str]:
    """The names `doc` mentions in one of the checked forms that the packages do not define."""
    bad = []
    for match in _CALL.finditer(doc):
        owner, name = match.group(1), match.group(2)
        if owner is not None and owner not in pkg.owners:
            continue
        if name not in pkg.defined and not hasattr(builtins, name):
            bad.append(match.group(0))
    for match in _MODULE_PATH.finditer(doc):
        parts = match.group(1).split(".")
        for end in range(len(parts), 1, -1):
            module = ".".join(parts[:end])
            if module in pkg.modules:
                if end < len(parts) and parts[end] not in pkg.modules[module]:
                    bad.append(match.group(0))
                break
    return bad


def test_docstrings_name_only_functions_that_exist() -> None:
    pkg = load_packages()
    assert len(pkg.modules) > 100 and "broker.store.dispatch" in pkg.modules
    problems = [f"{where}:{line}: {name}" for where, line, doc in pkg.docstrings for name in unknown_names(doc, pkg)]
    assert not problems, "docstrings name functions that do not exist:\n" + "\n".join(problems)


def test_the_check_catches_a_stale_name() -> None:
    pkg = load_packages()
    stale = "Recovery uses `dispatch_range()` and `broker.store.dispatch.dispatch_range`; "
    stale += "`ReputService.no_such_method_anywhere()`."
    assert unknown_names(stale, pkg) == [
        "`dispatch_range()`",
        "`ReputService.no_such_method_anywhere()`",
        "`broker.store.dispatch.dispatch_range`",
    ]
    fine = "`parse_record()`, `loop.call_soon()`, Java's `checkFields()`, `broker.store.dispatch_request.parse_record`"
    fine += ", `broker.conf` (a file)"
    assert unknown_names(fine, pkg) == []
