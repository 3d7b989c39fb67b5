"""The package's layers hold: every import in python/backtrail, read with ``ast``, goes
only where docs/architecture.md says it may.

Data flows one way: core <- store <- indexer <- service <- front ends. Front ends (the
MCP server, the native host, the CLI) reach the memory only through
``backtrail.service``; the store imports nothing above it; only the service and the
indexer touch the Rust core.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "python" / "backtrail"

SHARED = {"backtrail", "backtrail.errors"}
"""The package root (its version) and the errors: anyone may import them."""

ALLOWED: dict[str, set[str]] = {
    "backtrail.errors": set(),
    "backtrail.urls": set(),
    "backtrail.store": {"backtrail.urls"},
    "backtrail.config": {"backtrail.store"},
    "backtrail.importers": {"backtrail.store"},
    "backtrail.indexer": {"backtrail._core", "backtrail.config", "backtrail.store"},
    "backtrail.service": {
        "backtrail._core", "backtrail.config", "backtrail.urls", "backtrail.store",
        "backtrail.indexer", "backtrail.importers",
    },
    "backtrail.mcp_server": {"backtrail.config", "backtrail.service"},
    "backtrail.native_host": {"backtrail.config", "backtrail.service"},
    # The command line also starts the MCP front end (`backtrail mcp`, `make run`), with
    # the native host's dispatcher serving devices at POST /host beside it.
    "backtrail.cli": {
        "backtrail.config", "backtrail.service", "backtrail.mcp_server", "backtrail.native_host",
    },
}  # fmt: skip
"""Each part of the package, and what it may import besides itself and SHARED."""


def _part(module: str) -> str:
    """The part of the package ``module`` belongs to: its top-level sub-package or module."""
    pieces = module.split(".")
    return ".".join(pieces[:2]) if len(pieces) > 1 else module


def _module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every backtrail module the file imports, lazy ones included."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = _module_name(path)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found.append((node.lineno, module))
            if module == "backtrail":  # `from backtrail import _core, urls`
                found += [
                    (node.lineno, f"backtrail.{alias.name}")
                    for alias in node.names
                    if not alias.name.startswith("__")  # __version__
                ]
    return [(line, name) for line, name in found if name.split(".")[0] == "backtrail"]


def _sources() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "samples" not in p.parts)


def test_every_module_belongs_to_a_known_part() -> None:
    parts = {_part(_module_name(path)) for path in _sources()}
    assert parts - {"backtrail"} <= set(ALLOWED), parts - set(ALLOWED)


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_follow_the_layers(path: Path) -> None:
    part = _part(_module_name(path))
    allowed = ALLOWED.get(part, set()) | SHARED | {part}
    wrong = [
        f"line {line}: {name}"
        for line, name in _imports(path)
        if name not in SHARED and _part(name) not in allowed
    ]
    assert not wrong, f"{part} may import only {sorted(allowed)}; {path.name} imports {wrong}"


def test_the_checker_sees_lazy_relative_and_from_package_imports(tmp_path: Path) -> None:
    """The walker finds the imports a layer break would hide in."""
    sample = PACKAGE / "cli" / "common.py"
    names = {name for _, name in _imports(sample)}
    assert "backtrail.cli.progress" in names  # a lazy import inside a function
    tree_names = {name for path in _sources() for _, name in _imports(path)}
    assert "backtrail._core" in tree_names  # `from backtrail import _core`
