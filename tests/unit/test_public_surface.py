"""The public surface (issue 8, item 5): every module says what it exports, and is used that way.

- Every module under ``services/`` and ``workers/`` (not the Alembic migrations, not
  ``__main__.py``, not an ``__init__.py`` that is only a docstring) defines ``__all__``, and every
  name in it exists in the imported module.
- Nothing in ``services/``, ``workers/``, ``tests/`` or ``bench/`` reaches a private name of a
  project module: no ``from M import _name``, no ``module._name``, no ``"M._name"`` or
  ``"M:_name"`` string (dunders such as ``__version__`` are fine), and no private module
  (``workers.probe.scores._checks``) imported from outside its own package.
- A name taken from a module that defines ``__all__`` (``from M import name``, ``module.name``,
  ``"M.name"``, ``"M:name"``) is in that ``__all__``, or is a submodule of ``M``.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("services", "workers")
SCANNED = ("services", "workers", "tests", "bench")

# Modules that others are restructuring and that do not declare their public names yet. An entry
# names a module, or a package and every module under it. They are left out of every check below
# (as modules that must define ``__all__``, and as the modules whose names are reached into);
# empty this set once they declare ``__all__`` and their private helpers are renamed.
NOT_YET_DECLARED: frozenset[str] = frozenset()  # every module declares its surface

DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+(:[A-Za-z_][A-Za-z0-9_]*)?")


def _not_yet_declared(module: str) -> bool:
    return any(module == entry or module.startswith(entry + ".") for entry in NOT_YET_DECLARED)


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _only_docstring(tree: ast.Module) -> bool:
    return all(
        (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
        or (isinstance(node, ast.ImportFrom) and node.module == "__future__")
        for node in tree.body
    )


def _declared(tree: ast.Module) -> list[str] | None:
    """The literal ``__all__`` of a module, or None where it has none."""
    names = None
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = [node.target]
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            value = list(ast.literal_eval(node.value))
            names = (names or []) + value if isinstance(node, ast.AugAssign) else value
    return names


@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    tree: ast.Module

    @property
    def package(self) -> str:
        return self.name if self.path.name == "__init__.py" else self.name.rpartition(".")[0]


def _project_modules() -> dict[str, Module]:
    modules = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.relative_to(ROOT).parts:
                continue
            name = _module_name(path)
            modules[name] = Module(name, path, ast.parse(path.read_text(), str(path)))
    return modules


MODULES = _project_modules()
DECLARED = {name: _declared(module.tree) for name, module in MODULES.items()}


def _must_declare() -> list[str]:
    return [
        name
        for name, module in MODULES.items()
        if module.path.name != "__main__.py" and not _only_docstring(module.tree) and not _not_yet_declared(name)
    ]


@pytest.mark.parametrize("name", _must_declare())
def test_module_declares_its_public_names(name: str) -> None:
    declared = DECLARED[name]
    assert declared is not None, f"{MODULES[name].path.relative_to(ROOT)} defines no __all__"
    assert len(declared) == len(set(declared)), f"{name}.__all__ repeats a name"
    module = importlib.import_module(name)
    missing = [n for n in declared if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names what the module does not have: {missing}"


# -- who uses what --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Use:
    where: str  # path:line
    user: str  # the using file's module name ("tests.unit.x" for a test)
    module: str  # the project module reached into
    name: str  # the name taken from it


def _scanned_files() -> Iterator[Path]:
    for top in SCANNED:
        yield from sorted((ROOT / top).rglob("*.py"))


def _absolute(path: Path, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    package = package[: len(package) - (node.level - 1)]
    return ".".join(package + ([node.module] if node.module else []))


def _dotted(node: ast.expr) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


def _uses(path: Path) -> Iterator[Use]:
    return _uses_of(ast.parse(path.read_text(), str(path)), path)


def _uses_of(tree: ast.Module, path: Path) -> Iterator[Use]:  # noqa: C901
    rel = path.relative_to(ROOT)
    user = _module_name(path)
    aliases: dict[str, str] = {}  # local name -> project module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES or alias.name.split(".")[0] in PACKAGES:
                    bound = alias.asname or alias.name.split(".")[0]
                    aliases[bound] = alias.name if alias.asname else bound
                    yield Use(f"{rel}:{node.lineno}", user, alias.name, "")
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(path, node)
            if module not in MODULES:
                continue
            yield Use(f"{rel}:{node.lineno}", user, module, "")
            for alias in node.names:
                if f"{module}.{alias.name}" in MODULES:
                    aliases[alias.asname or alias.name] = f"{module}.{alias.name}"
                    yield Use(f"{rel}:{node.lineno}", user, f"{module}.{alias.name}", "")
                else:
                    yield Use(f"{rel}:{node.lineno}", user, module, alias.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Del):
            parts = _dotted(node)
            if parts is None or parts[0] not in aliases:
                continue
            module = aliases[parts[0]]
            for part in parts[1:]:
                if f"{module}.{part}" in MODULES:
                    module = f"{module}.{part}"
                    continue
                if module in MODULES:
                    yield Use(f"{rel}:{node.lineno}", user, module, part)
                break
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and DOTTED.fullmatch(node.value):
            module, colon, name = node.value.partition(":")
            if not colon:
                module, _, name = node.value.rpartition(".")
            if module in MODULES and f"{module}.{name}" not in MODULES:
                yield Use(f"{rel}:{node.lineno}", user, module, name)


USES = [use for path in _scanned_files() for use in _uses(path)]


def _private_module_part(module: str) -> str | None:
    """The private package or module in a dotted module name (``workers.probe.scores._checks``)."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if _is_private(part):
            return ".".join(parts[:i])
    return None


def test_no_private_names_of_project_modules_are_used() -> None:
    offences = []
    for use in USES:
        if _not_yet_declared(use.module):
            continue
        if use.name and _is_private(use.name):
            offences.append(f"{use.where}: {use.module}.{use.name} is private")
        parent = _private_module_part(use.module)
        if parent is not None and not (use.user == parent or use.user.startswith(parent + ".")):
            offences.append(f"{use.where}: {use.module} is private to {parent}")
    assert not offences, "private names used outside their module:\n" + "\n".join(offences)


def test_modules_are_used_only_through_their_all() -> None:
    offences = []
    for use in USES:
        declared = DECLARED.get(use.module)
        if (
            not use.name
            or declared is None
            or _not_yet_declared(use.module)
            or _is_private(use.name)
            or use.user == use.module
        ):
            continue
        if use.name not in declared and not (use.name.startswith("__") and use.name.endswith("__")):
            offences.append(f"{use.where}: {use.module}.{use.name} is not in its __all__")
    assert not offences, "names used that their module does not export:\n" + "\n".join(offences)


def test_the_scans_see_a_known_private_use() -> None:
    """The scanner is not blind: a test that reaches into a module is found."""
    source = (
        "import services.core.registry as r\nfrom services.core import metrics\n"
        "from services.core.budget import _x, RunBudget\nr._y\nmetrics.task_error\n"
        "'services.core.config._z'\n"
    )
    path = ROOT / "tests" / "unit" / "_scan_probe.py"
    tree = ast.parse(source)
    uses = list(_uses_of(tree, path))
    taken = {(use.module, use.name) for use in uses if use.name}
    assert {
        ("services.core.budget", "_x"),
        ("services.core.budget", "RunBudget"),
        ("services.core.registry", "_y"),
        ("services.core.metrics", "task_error"),
        ("services.core.config", "_z"),
    } <= taken
