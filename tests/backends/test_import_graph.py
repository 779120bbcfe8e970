"""backends/ is a layer below app/ and nodes/, and its modules import each other without cycles."""

from __future__ import annotations

import ast
from pathlib import Path

BACKENDS = Path(__file__).resolve().parents[2] / "backends"


def _imports(path: Path) -> set[str]:
    """Every module name an import statement in the file names (top level, in functions, under TYPE_CHECKING)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # relative import inside the package
                module = f"backends.{module}" if module else "backends"
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def _graph() -> dict[str, set[str]]:
    modules = {"backends" if p.stem == "__init__" else f"backends.{p.stem}": p for p in BACKENDS.glob("*.py")}
    return {name: {m for m in _imports(path) if m in modules and m != name} for name, path in modules.items()}


def test_backends_import_neither_app_nor_nodes() -> None:
    offenders = {
        p.name: sorted(n for n in _imports(p) if n.split(".")[0] in ("app", "nodes")) for p in BACKENDS.glob("*.py")
    }
    assert not {name: found for name, found in offenders.items() if found}


def test_backends_modules_have_no_import_cycle() -> None:
    graph = _graph()
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        for dep in sorted(graph[module]):
            assert dep not in path, "import cycle: " + " -> ".join([*path[path.index(dep) :], dep])
            if dep not in done:
                visit(dep, [*path, dep])
        done.add(module)

    for module in sorted(graph):
        if module not in done:
            visit(module, [module])


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for dep in graph[todo.pop()] - seen:
            seen.add(dep)
            todo.append(dep)
    return seen


def test_jobs_reach_the_engine_only_through_the_protocol() -> None:
    graph = _graph()
    for module in ("backends.engine_jobs", "backends.engine_protocol", "backends.batch"):
        assert "backends.engine" not in _reachable(graph, module), module
