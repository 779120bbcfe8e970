"""The house rules of docs/architecture.md, checked from the code's own imports (every import statement,
including those inside functions and TYPE_CHECKING blocks)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("app", "nodes", "backends", "metagen")
APP_LAYERS = ["platform", "workflow", "run", "traces", "viz", "share", "eval", "service", "serve", "mcp", "ui",
              "desktop", "cli"]
"""Sub-packages of app/ from the bottom up; a package may import only those before it (viz, traces and share
sit side by side: see ALLOWED_SIDEWAYS)."""
ALLOWED_SIDEWAYS: set[tuple[str, str]] = set()
METAGEN_MAY_IMPORT = ("app.service", "app.workflow", "app.run.scheduler", "app.run.events", "app.run.status")
"""The public Python API (`metagen`) sits above app.service: of `app` it imports only the service layer, the
workflow model and the run results (the scheduler's RunResult and Budget, the events, the statuses)."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            found[_module_name(path)] = path
    return found


MODULES = _modules()


def _imported(path: Path) -> Iterator[str]:
    """Every module of this project that `path` imports (a `from pkg import name` of a sub-module counts as
    that sub-module)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in MODULES else node.module
                     for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name:
                yield name


GRAPH = {name: {t for t in _imported(path) if t != name} for name, path in MODULES.items()}


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(GRAPH[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    return found


def test_the_scan_sees_the_packages() -> None:
    assert {"app.run.scheduler", "nodes.base", "backends.llama.worker.engine", "app.ui.app"} <= set(MODULES)
    assert "app.run.events" in GRAPH["app.run.scheduler"]


def test_no_import_cycles() -> None:
    assert _cycles() == []


@pytest.mark.parametrize(("lower", "forbidden"), [("backends", ("nodes", "app", "metagen")),
                                                  ("nodes", ("app", "metagen")), ("app", ("metagen",))])
def test_no_upward_imports_between_packages(lower: str, forbidden: tuple[str, ...]) -> None:
    bad = sorted(f"{m} -> {t}" for m, ts in GRAPH.items() if m.split(".")[0] == lower for t in ts
                 if t.split(".")[0] in forbidden)
    assert bad == []


BACKEND_SUB_PACKAGES = ("llama", "remote", "grammar", "tools", "replay")
"""backends/ by what each part talks to; base, pool, fake, engine_protocol and token_stats sit at its top."""


def _backend_part(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "backends" and len(parts) > 2 and parts[1] in BACKEND_SUB_PACKAGES else None


@pytest.mark.parametrize(("part", "forbidden"), [("remote", "llama"), ("llama", "remote"), ("grammar", "llama"),
                                                 ("grammar", "remote"), ("tools", "llama"), ("tools", "remote"),
                                                 ("replay", "llama"), ("replay", "remote")])
def test_backend_sub_packages_stay_apart(part: str, forbidden: str) -> None:
    """The OpenAI client never needs llama.cpp and the engine never needs HTTP; the grammar checkers and the tool-call
    formats (rendered, parsed, constrained) are pure, used by both."""
    bad = sorted(f"{m} -> {t}" for m, ts in GRAPH.items() if _backend_part(m) == part for t in ts
                 if _backend_part(t) == forbidden)
    assert bad == []


def test_backends_top_level_is_small() -> None:
    top = sorted(m for m in MODULES if m.startswith("backends.") and m.count(".") == 1
                 and m.split(".")[1] not in BACKEND_SUB_PACKAGES)
    assert top == ["backends.base", "backends.beam_search", "backends.engine_protocol", "backends.fake",
                   "backends.pool", "backends.token_stats"]


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "app" and len(parts) > 1 and parts[1] in APP_LAYERS else None


def test_app_sub_packages_import_only_downwards() -> None:
    bad = []
    for module, targets in GRAPH.items():
        src = _layer(module)
        for target in targets:
            dst = _layer(target)
            if src and dst and src != dst and APP_LAYERS.index(dst) > APP_LAYERS.index(src) \
                    and (src, dst) not in ALLOWED_SIDEWAYS:
                bad.append(f"{module} -> {target}")
    assert bad == []


def test_metagen_sits_on_the_service_layer() -> None:
    bad = sorted(f"{m} -> {t}" for m, ts in GRAPH.items() if m.split(".")[0] == "metagen" for t in ts
                 if t.split(".")[0] == "app" and not any(t == a or t.startswith(a + ".") for a in METAGEN_MAY_IMPORT))
    assert bad == []
    assert any(t.startswith("app.service.") for m, ts in GRAPH.items() if m.startswith("metagen") for t in ts)


def test_only_the_ui_imports_gradio() -> None:
    bad = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(n.split(".")[0] == "gradio" for n in names) and not name.startswith("app.ui"):
                bad.append(name)
    assert bad == []


def test_no_string_imports() -> None:
    offenders = [name for name, path in MODULES.items() if "import_module(" in path.read_text(encoding="utf-8")]
    assert offenders == []


def test_app_top_level_stays_small() -> None:
    flat = sorted(p.name for p in (ROOT / "app").glob("*.py"))
    assert len(flat) <= 6, flat


def test_every_module_says_what_it_owns() -> None:
    missing = [name for name, path in MODULES.items() if not ast.get_docstring(ast.parse(path.read_text("utf-8")))]
    assert missing == []


def test_no_static_file_over_900_lines() -> None:
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "static").rglob("*")
            if p.suffix in {".js", ".css", ".html"} and (n := len(p.read_text(encoding="utf-8").splitlines())) > 900}
    assert long == {}


NODES_MAY_IMPORT_FROM_BACKENDS = ("backends.base", "backends.beam_search", "backends.token_stats", "backends.grammar",
                                  "backends.tools")
"""Nodes reach models only through the NodeContext: of backends they import the protocol's data, the pure grammar
checks and the pure tool-calling package (its types, rendering, parsing and grammars; never an engine or a server)."""


def test_nodes_import_only_the_pure_parts_of_backends() -> None:
    bad = sorted(f"{m} -> {t}" for m, ts in GRAPH.items() if m.split(".")[0] == "nodes" for t in ts
                 if t.split(".")[0] == "backends"
                 and not any(t == a or t.startswith(a + ".") for a in NODES_MAY_IMPORT_FROM_BACKENDS))
    assert bad == []


def test_backends_tools_is_a_leaf() -> None:
    """backends.tools imports only backends.base, the pure grammar package (its strict JSON-schema converter) and
    itself: the engine, the servers and the nodes all use it."""
    bad = sorted(f"{m} -> {t}" for m, ts in GRAPH.items() if m.startswith("backends.tools") for t in ts
                 if t.split(".")[0] in PACKAGES
                 and not (t.startswith(("backends.tools", "backends.grammar")) or t == "backends.base"))
    assert bad == []
