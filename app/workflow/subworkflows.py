"""Sub-workflows: checking the tree of children of a workflow's workflow and route nodes (missing, cycles, depth,
ports, `map`, branches that agree), and binding each such node's ports to its child's. Finding the files:
child_files.py."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from app.workflow.child_files import ChildLoader as ChildLoader  # re-exported: callers build loaders from here
from app.workflow.child_files import ChildRefError, Found, default_loader
from app.workflow.child_overrides import SET_PARAM, apply_overrides
from app.workflow.problems import Issue, WorkflowError
from app.workflow.spec import Workflow
from nodes.base import CANDIDATES, JSON, NUMBER, TEXT, NodeKind, Port, port_compatible
from nodes.kinds.route import BIN_OUTPUT, BRANCH_OUTPUT, SCORE_INPUT
from nodes.kinds.workflow import DEFAULT_OUTPUT

WORKFLOW_KIND = "workflow"
ROUTE_KIND = "route"
CHILD_KINDS = (WORKFLOW_KIND, ROUTE_KIND)
"""Kinds whose ports are their children's: bound per node by validation."""
MAX_DEPTH = 4
"""Deepest nesting of sub-workflows: a child of a child ... at most 4 levels below the workflow run."""
MAX_CHILD_INSTANCES = 500
"""Workflow nodes in a whole tree, each use of a child counted with everything below it (12 uses of a child that
uses another 12 times are 156): nesting multiplies, and a tree is checked, stored and drawn per use."""
CheckMemo = dict[tuple[str, str, int], "Checked"]
"""Children already checked in this tree (or folder): (identity, content hash, depth) -> the child's Checked."""
INPUT_TYPE_TO_PORT = {"text": TEXT, "number": NUMBER, "json": JSON}
"""The port type of a workflow input of each `inputs:` type."""


@dataclass
class Checked:
    """A workflow's problems (its children's included, prefixed), and what its workflow nodes resolve to."""

    issues: list[Issue] = field(default_factory=list)
    children: dict[str, Child] = field(default_factory=dict)
    """Workflow node id -> its resolved child (only the nodes whose child loaded); a route node's branch i is
    under `branch_key(node id, i)` (`route/1`), the path its nodes run under."""
    routes: dict[str, type[NodeKind]] = field(default_factory=dict)
    """Route node id -> the route kind bound to its branches' ports (only when every branch loaded)."""
    output_types: dict[str, str] = field(default_factory=dict)
    """Workflow output name -> port type (json when it cannot be told)."""
    instances: int = 0
    """Workflow nodes of the whole tree below this workflow, each use counted (see MAX_CHILD_INSTANCES)."""

    def kinds(self) -> dict[str, type[NodeKind]]:
        """Node id -> the NodeKind bound to that workflow (or route) node's child ports."""
        return {**{node_id: child.kind for node_id, child in self.children.items()}, **self.routes}


@dataclass
class Child:
    """One workflow node's child, resolved and checked."""

    node_id: str
    label: str
    workflow: Workflow
    checked: Checked
    kind: type[NodeKind]
    mapped: str | None
    models: dict[str, str]
    yaml: str
    tree_hash: str
    owner: str = ""
    """The workflow or route node this child belongs to ("" for node_id itself)."""
    branch: int | None = None
    """A route node's branch index (None: a workflow node's child)."""

    @property
    def node(self) -> str:
        """The id of the node in the parent workflow that runs this child."""
        return self.owner or self.node_id

    def texts(self, ref: str) -> dict[str, str]:
        """This child's YAML and its descendants', by reference, for storing with a run or carrying in a link."""
        out = {ref: self.yaml}
        for grandchild in self.checked.children.values():
            out.update(grandchild.texts(_ref_of(self.workflow, grandchild)))
        return out


def branch_key(node_id: str, index: int) -> str:
    """Where a route node's branch `index` is kept in `Checked.children`, and the path its nodes run under."""
    return f"{node_id}/{index}"


def branch_children(children: Mapping[str, Child], node_id: str) -> list[Child]:
    """A route node's resolved branches in order (empty for any other node)."""
    out, index = [], 0
    while branch_key(node_id, index) in children:
        out.append(children[branch_key(node_id, index)])
        index += 1
    return out


def workflow_ports(wf: Workflow, checked: Checked) -> dict[str, Any]:
    """The ports a workflow node using `wf` gets (unmapped), for the editor: inputs with their port types and
    whether they must be wired, outputs with the type of what they refer to; `hash` changes with its results."""
    return {
        "hash": tree_hash(wf, checked.children),
        "inputs": [{"name": name, "type": INPUT_TYPE_TO_PORT.get(spec.type, JSON), "required": spec.default is None,
                    "description": spec.description} for name, spec in wf.inputs.items()],
        "outputs": [{"name": name, "type": type_, "description": ""} for name, type_ in checked.output_types.items()],
    }


def descendants(checked: Checked, prefix: str = "") -> Iterator[tuple[str, Child]]:
    """Every child of the tree with its workflow-node path (`w`, `w/inner`), depth first."""
    for node_id, child in checked.children.items():
        path = f"{prefix}{node_id}"
        yield path, child
        yield from descendants(child.checked, f"{path}/")


def prefixed(issues: list[Issue], path: str, label: str) -> list[Issue]:
    """Problems of a child workflow as its parent reports them (see `_prefixed`)."""
    return [_prefixed(issue, path, label) for issue in issues]


def workflow_texts(wf: Workflow, checked: Checked) -> dict[str, str]:
    """Every child YAML the workflow needs, by reference (as written in `params.workflow`)."""
    out: dict[str, str] = {}
    for child in checked.children.values():
        out.update(child.texts(_ref_of(wf, child)))
    return out


def child_runs(wf: Workflow, checked: Checked, _memo: dict[int, int] | None = None) -> int:
    """The sub-workflow runs a run of `wf` starts, as far as it can be told before it runs: an unmapped child runs
    once, a mapped one once per candidate of what feeds it where that is known (a `collect`'s inputs, a node's
    `n`, a mapped workflow node's own count), else once (a lower bound). Each distinct child is counted once."""
    memo = {} if _memo is None else _memo
    total = 0
    route_most: dict[str, int] = {}  # a route node runs one of its branches: the largest counts
    for node_id, child in checked.children.items():
        key = id(child.checked)
        if key not in memo:
            memo[key] = child_runs(child.workflow, child.checked, memo)
        if child.branch is not None:
            route_most[child.node] = max(route_most.get(child.node, 0), 1 + memo[key])
        else:
            total += fan_out(wf, checked, node_id) * (1 + memo[key])
    return total + sum(route_most.values())


def fan_out(wf: Workflow, checked: Checked, node_id: str) -> int:
    """How many times the workflow node `node_id` runs its child: 1 unmapped, else the candidates fed to it
    where known (see `child_runs`)."""
    node = wf.node(node_id)
    mapped = mapped_input(node) if node is not None else None
    if node is None or mapped is None or not isinstance(node.inputs.get(mapped), str):
        return 1
    source = wf.node(node.inputs[mapped].partition(".")[0])
    if source is None:
        return 1
    if source.kind == "collect":
        return max(1, len(source.inputs))
    if source.id in checked.children:
        return fan_out(wf, checked, source.id)
    n = source.params.get("n") if isinstance(source.params, dict) else None
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 1


def _ref_of(wf: Workflow, child: Child) -> str:
    """The reference a child was written as: a workflow node's `workflow`, a route branch's entry of `branches`."""
    node = wf.node(child.node)
    if node is None:
        return ""
    if child.branch is not None:
        branches = node.params.get("branches")
        return str(branches[child.branch]) if isinstance(branches, list) and child.branch < len(branches) else ""
    return str(node.params.get("workflow", ""))


def mapped_input(node: Any) -> str | None:
    """A workflow node's mapped input: the `map:` key, else `params.map` (None when neither is set)."""
    value = node.map if node.map is not None else node.params.get("map")
    return str(value) if value not in (None, "") else None


def tree_hash(wf: Workflow, children: Mapping[str, Child]) -> str:
    """The canonical hash of a workflow and, by node, of every child it uses: what its results depend on."""
    parts = [wf.semantic_hash(), *(f"{n}={c.tree_hash}" for n, c in sorted(children.items()))]
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]


def version_hash(wf: Workflow, children: Mapping[str, Child]) -> str:
    """The hash a run records and a saved version is kept under: the workflow's semantic hash when it uses no
    sub-workflow, else its tree hash (a child's change is a new version of the parent)."""
    return tree_hash(wf, children) if children else wf.semantic_hash()


def bind_kind(base: type[NodeKind], child: Workflow, output_types: Mapping[str, str],
              mapped: str | None) -> type[NodeKind]:
    """`base` (the workflow kind) with the child's ports: its inputs (the mapped one takes candidates; an input
    with a default need not be wired), and its outputs, or `candidates` alone when mapped."""
    inputs = tuple(Port(name, CANDIDATES if name == mapped else INPUT_TYPE_TO_PORT.get(spec.type, JSON),
                        spec.description, required=spec.default is None) for name, spec in child.inputs.items())
    outputs = base.outputs if mapped else tuple(Port(name, type_) for name, type_ in output_types.items())
    return type(f"{base.__name__}_{child.name}", (base,), {"inputs": inputs, "outputs": outputs,
                                                          "variadic_inputs": False})


CheckFn = Callable[..., Checked]
"""validation.check(wf, registry, loader, chain, memo=): the flat checks of one workflow plus its children's."""


@dataclass
class _Resolver:
    """Resolves the workflow nodes of one workflow, checking each child with `check` (which recurses)."""

    wf: Workflow
    registry: Any
    loader: ChildLoader
    chain: tuple[tuple[str, str], ...]
    check: CheckFn
    memo: CheckMemo = field(default_factory=dict)
    out: Checked = field(default_factory=Checked)

    def line(self, index: int, *rest: str | int) -> int | None:
        return self.wf.line_of("nodes", index, *rest)

    def add(self, code: str, message: str, hint: str, node_id: str, line: int | None) -> None:
        self.out.issues.append(Issue(code, message, hint, node_id=node_id or None, line=line))

    def run(self) -> Checked:
        base = self.registry.get(WORKFLOW_KIND)
        route = self.registry.get(ROUTE_KIND)
        found: list[tuple[int, Any, Found]] = []
        for index, node in enumerate(self.wf.nodes):
            if node.kind == WORKFLOW_KIND and base is not None:
                child = self.resolve(index, node, base)
                if child is not None:
                    found.append((index, node, child))
            elif node.kind == ROUTE_KIND and route is not None:
                first = _RouteResolver(self, index, node).resolve(route)
                if first is not None:
                    found.append((index, node, first))
        for index, node, child in found:  # once every child is bound: a wire may come from another workflow node
            self.check_ports(index, node, child, mapped_input(node) if node.kind == WORKFLOW_KIND else None)
        return self.out

    def load_checked(self, index: int, node: Any, ref: str, path: str, param: str) -> tuple[Found, Checked] | None:
        """Load and check one child written as `ref` (its problems reported under `path`); None when unusable."""
        parent_dir = self.wf.source.parent if self.wf.source is not None else None
        try:
            found = self.loader.load(ref, parent_dir)
        except ChildRefError as exc:
            self.add(exc.code, str(exc), exc.hint, node.id, self.line(index, "params", param))
            return None
        except WorkflowError as exc:
            for issue in exc.issues:
                self.out.issues.append(_prefixed(issue, path, ref))
            return None
        if not self.cycle_free(index, node, found):
            return None
        found = self.with_overrides(index, node, found)
        checked = self.checked(found)
        if self.out.instances + 1 + checked.instances > MAX_CHILD_INSTANCES:
            self.add("too_many_subworkflows", f"this tree of sub-workflows has more than {MAX_CHILD_INSTANCES} "
                     f"workflow nodes, each use of a child counted with its own ({found.label} used here)",
                     "use a child fewer times, nest fewer levels, or map one workflow node over candidates",
                     node.id, self.line(index, "params", param))
            return None
        self.out.instances += 1 + checked.instances
        self.out.issues += [_prefixed(issue, path, found.label) for issue in checked.issues]
        return found, checked

    def resolve(self, index: int, node: Any, base: type[NodeKind]) -> Found | None:
        """Load, check and bind one workflow node's child (None, reported, when it cannot be used)."""
        ref = node.params.get("workflow")
        if not isinstance(ref, str) or not node.id:
            return None  # reported by the param and id checks
        loaded = self.load_checked(index, node, ref, node.id, "workflow")
        if loaded is None:
            return None
        found, checked = loaded
        mapped = mapped_input(node)
        kind = bind_kind(base, found.workflow, checked.output_types, mapped)
        models = node.params.get("models") if isinstance(node.params.get("models"), dict) else {}
        self.check_models(index, node, found.workflow, models)
        self.out.children[node.id] = Child(
            node.id, found.label, found.workflow, checked, kind, mapped, {str(k): str(v) for k, v in models.items()},
            found.yaml, tree_hash(found.workflow, checked.children))
        return found

    def checked(self, found: Found) -> Checked:
        """The child's checks, made once per tree for each distinct child at each depth (its content hashed): a
        child used W times at each of 4 levels is checked 4 times, not W**4. Any cycle through a child is found
        by the child's own check (it is on its own chain), so a check made under another chain holds here."""
        digest = hashlib.sha256(found.yaml.encode()).hexdigest()
        key = (found.key, digest, len(self.chain))
        if key not in self.memo:
            self.memo[key] = self.check(found.workflow, self.registry, self.loader,
                                        (*self.chain, (found.key, found.label)), memo=self.memo)
        return self.memo[key]

    def with_overrides(self, index: int, node: Any, found: Found) -> Found:
        """The child with the node's `set` params applied (the problems reported on the node)."""
        overrides = node.params.get(SET_PARAM)
        if not isinstance(overrides, dict) or not overrides:
            return found
        child, problems = apply_overrides(found.workflow, overrides)
        for problem in problems:
            self.add("bad_param", f"set: {problem}", "name a node of the child workflow: CHILD_NODE.param, or "
                     "CHILD/GRANDCHILD.param through a workflow node of the child", node.id,
                     self.line(index, "params", SET_PARAM))
        return replace(found, workflow=child, yaml=child.to_yaml())  # what runs: its own checks and trace text

    def cycle_free(self, index: int, node: Any, found: Found) -> bool:
        line = self.line(index, "params", "workflow")
        if any(key == found.key for key, _ in self.chain):
            names = " -> ".join([*(label for _, label in self.chain), found.label])
            self.add("workflow_cycle", f"the sub-workflows form a cycle: {names}",
                     "a workflow cannot use itself, directly or through its children", node.id, line)
            return False
        if len(self.chain) > MAX_DEPTH:  # the chain holds the run's workflow (depth 0) and the child's parents
            names = " -> ".join([*(label for _, label in self.chain), found.label])
            self.add("too_deep", f"sub-workflows nest more than {MAX_DEPTH} levels deep: {names}",
                     f"flatten the deepest levels: at most {MAX_DEPTH} levels of workflow nodes", node.id, line)
            return False
        return True

    def check_ports(self, index: int, node: Any, found: Found, mapped: str | None) -> None:
        """Each wire into the node against the child's inputs, and the mapped input against a candidate set."""
        child = found.workflow
        for port, ref in node.inputs.items():
            if node.kind == ROUTE_KIND and port == SCORE_INPUT:
                continue  # the route's own input (any score; checked against its kind's port)
            line = self.line(index, "inputs", port)
            spec = child.inputs.get(port)
            if spec is None:
                self.add("type_mismatch", f"the child {found.label} has no input {port!r}",
                         f"its inputs are: {', '.join(child.inputs) or 'none'}", node.id, line)
                continue
            want = CANDIDATES if port == mapped else INPUT_TYPE_TO_PORT.get(spec.type, JSON)
            got = self.source_type(ref)
            if got is not None and not port_compatible(got, want):
                what = "mapped input" if port == mapped else "input"
                self.add("type_mismatch", f"the child's {what} {port!r} ({found.label}) takes {want} but "
                         f"{ref} is {got}", "wire a candidate set into the mapped input" if port == mapped
                         else f"connect a {want} output", node.id, line)
        if mapped is not None:
            line = self.line(index, "map") or self.line(index, "params", "map")
            if mapped not in child.inputs:
                self.add("type_mismatch", f"map names {mapped!r}, which is not an input of the child {found.label}",
                         f"map one of: {', '.join(child.inputs) or 'none'}", node.id, line)
            elif node.map is not None and node.params.get("map") not in (None, "", node.map):
                self.add("bad_param", "the node sets both `map:` and `params.map` to different inputs",
                         "keep one of them", node.id, line)
            output = node.params.get("output") or DEFAULT_OUTPUT
            if isinstance(output, str) and output not in child.outputs:
                self.add("bad_param", f"param 'output': the child {found.label} has no output {output!r}",
                         f"name one of its outputs: {', '.join(child.outputs) or 'none'}", node.id,
                         self.line(index, "params", "output") or line)

    def source_type(self, ref: str) -> str | None:
        head, _, tail = ref.partition(".")
        if head == "inputs":
            spec = self.wf.inputs.get(tail)
            return INPUT_TYPE_TO_PORT.get(spec.type) if spec else None
        node = self.wf.node(head)
        bound = self.out.children.get(head)
        cls = bound.kind if bound is not None else self.out.routes.get(head) or (
            self.registry.get(node.kind) if node is not None else None)
        port = cls.output_port(tail) if cls is not None else None
        return port.type if port is not None else None

    def check_models(self, index: int, node: Any, child: Workflow, models: Mapping[Any, Any]) -> None:
        child_aliases = list(child.models) or ["main"]
        for alias, target in models.items():
            line = self.line(index, "params", "models")
            if alias not in child_aliases:
                self.add("unknown_model", f"the child has no model {alias!r}",
                         f"its models are: {', '.join(child_aliases)}", node.id, line)
            if target not in (list(self.wf.models) or ["main"]):
                self.add("unknown_model", f"model {target!r} is not declared in this workflow",
                         f"map onto one of: {', '.join(self.wf.models) or 'main'}", node.id, line)


def _prefixed(issue: Issue, node_id: str, label: str) -> Issue:
    """A child's problem as the parent reports it: the node path prefixed, the child's file kept."""
    path = f"{node_id}/{issue.node_id}" if issue.node_id else node_id
    return Issue(issue.code, issue.message, issue.hint, node_id=path, line=issue.line, severity=issue.severity,
                 file=issue.file or label)


def resolve_children(wf: Workflow, registry: Any, loader: ChildLoader | None,
                     chain: tuple[tuple[str, str], ...], check: CheckFn, memo: CheckMemo | None = None) -> Checked:
    """The workflow nodes of `wf` resolved to their children (each distinct child checked once by `check`, the
    checks kept in `memo`: pass one memo to check many workflows of one folder with one loader), with the
    problems."""
    if not any(node.kind in CHILD_KINDS for node in wf.nodes):
        return Checked()
    if not chain:
        key = str(wf.source.resolve()) if wf.source is not None else "<this workflow>"
        chain = ((key, str(wf.source) if wf.source is not None else wf.name),)
    return _Resolver(wf, registry, loader or default_loader(), chain, check, {} if memo is None else memo).run()


@dataclass
class _RouteResolver:
    """One route node's branches: each loaded, checked and kept under `branch_key`; they must take the same inputs
    and give the same outputs; the node is bound to them (plus its `score` input, `branch` and `bin` outputs)."""

    parent: _Resolver
    index: int
    node: Any

    def add(self, code: str, message: str, hint: str) -> None:
        self.parent.add(code, message, hint, self.node.id, self.parent.line(self.index, "params", "branches"))

    def resolve(self, route: type[NodeKind]) -> Found | None:
        """The first branch (its ports are the node's), or None when a branch cannot be used (reported)."""
        node, branches = self.node, self.node.params.get("branches")
        if not isinstance(branches, list) or not node.id or not branches:
            return None  # reported by the param and id checks
        loaded: list[tuple[Found, Checked]] = []
        for i, ref in enumerate(branches):
            if not isinstance(ref, str) or not ref:
                self.add("unknown_workflow", f"branch {i} is not a workflow name: {ref!r}",
                         "name a workflow of the workflows folder (its file name without .yaml)")
                return None
            got = self.parent.load_checked(self.index, node, ref, branch_key(node.id, i), "branches")
            if got is None:
                return None
            loaded.append(got)
        if not self.agree(loaded):
            return None
        models = node.params.get("models") if isinstance(node.params.get("models"), dict) else {}
        for i, (found, checked) in enumerate(loaded):
            self.parent.check_models(self.index, node, found.workflow, models)
            key = branch_key(node.id, i)
            self.parent.out.children[key] = Child(
                key, found.label, found.workflow, checked, bind_kind(self.parent.registry.get(WORKFLOW_KIND) or route,
                                                                    found.workflow, checked.output_types, None),
                None, {str(k): str(v) for k, v in models.items()}, found.yaml,
                tree_hash(found.workflow, checked.children), owner=node.id, branch=i)
        first, checked = loaded[0]
        self.parent.out.routes[node.id] = bind_route(route, first.workflow, checked.output_types)
        return first

    def agree(self, loaded: list[tuple[Found, Checked]]) -> bool:
        """Whether every branch takes the first one's inputs and gives its outputs (else reported)."""
        first = loaded[0][0]
        for found, _ in loaded[1:]:
            if set(found.workflow.inputs) != set(first.workflow.inputs):
                self.add("route_mismatch", f"the branches take different inputs: {first.label} takes "
                         f"{sorted(first.workflow.inputs)}, {found.label} takes {sorted(found.workflow.inputs)}",
                         "route between workflows with the same inputs (rename or add inputs so they match)")
                return False
            if set(found.workflow.outputs) != set(first.workflow.outputs):
                self.add("route_mismatch", f"the branches give different outputs: {first.label} gives "
                         f"{sorted(first.workflow.outputs)}, {found.label} gives {sorted(found.workflow.outputs)}",
                         "route between workflows with the same outputs (rename outputs so they match)")
                return False
        return True


def bind_route(base: type[NodeKind], branch: Workflow, output_types: Mapping[str, str]) -> type[NodeKind]:
    """The route kind with its branches' ports: `score` and the branches' inputs; their outputs, `branch`, `bin`."""
    inputs = (*base.inputs, *(Port(name, INPUT_TYPE_TO_PORT.get(spec.type, JSON), spec.description,
                                   required=spec.default is None) for name, spec in branch.inputs.items()
                              if name != SCORE_INPUT))
    outputs = (*(Port(name, type_) for name, type_ in output_types.items()
                 if name not in (BRANCH_OUTPUT, BIN_OUTPUT)), *base.outputs)
    return type(f"{base.__name__}_{branch.name}", (base,), {"inputs": inputs, "outputs": outputs,
                                                           "variadic_inputs": False})
