"""Static checks of a workflow against the node registry: every problem, before any model is touched."""

from __future__ import annotations

import difflib
import math
from typing import Any

import networkx as nx

from app.workflow.beam_checks import beam_issues
from app.workflow.model_specs import check_model_entry
from app.workflow.problems import Issue
from app.workflow.reward_checks import reward_model_issues
from app.workflow.spec import INPUT_TYPES, NodeSpec, Workflow, lone_surrogate
from app.workflow.speculative_spec import check_speculative
from app.workflow.subworkflows import CHILD_KINDS, WORKFLOW_KIND, Checked, CheckMemo, ChildLoader, resolve_children
from app.workflow.subworkflows import INPUT_TYPE_TO_PORT as INPUT_TYPE_TO_PORT  # re-exported
from nodes.base import JSON, TEXT, NodeKind, node_id_problem, port_compatible
from nodes.decoding import grammar_problems
from nodes.registry import NodeRegistry

KindMap = dict[str, type[NodeKind]]
"""Node id -> the kind bound to a workflow node's child ports (app/workflow/subworkflows.py)."""


def _suggest(word: str, options: list[str]) -> str:
    close = difflib.get_close_matches(str(word), options, n=1)  # a YAML key may be a number: `params: {1: x}`
    return f"did you mean {close[0]!r}?" if close else f"choose one of: {', '.join(options)}"


def split_ref(ref: str) -> tuple[str, str] | None:
    """'node.port' -> (node, port); 'inputs.name' -> ('inputs', name); None when malformed."""
    if not isinstance(ref, str) or "." not in ref:
        return None
    head, _, tail = ref.partition(".")
    if not head or not tail:
        return None
    return head, tail


def ref_type(wf: Workflow, registry: NodeRegistry, ref: str,
             by_id: dict[str, NodeSpec] | None = None, kinds: KindMap | None = None) -> str | None:
    """The port type a reference points at, or None when it cannot be resolved (`kinds`: bound workflow nodes)."""
    parts = split_ref(ref)
    if parts is None:
        return None
    head, tail = parts
    if head == "inputs":
        spec = wf.inputs.get(tail)
        return INPUT_TYPE_TO_PORT.get(spec.type) if spec else None
    node = by_id.get(head) if by_id is not None else wf.node(head)
    cls = (kinds or {}).get(head) or (registry.get(node.kind) if node else None)
    port = cls.output_port(tail) if cls else None
    return port.type if port else None


def build_graph(wf: Workflow) -> nx.DiGraph:
    """Node ids as graph nodes; an edge u -> v for each wire from u's output into v."""
    graph = nx.DiGraph()
    ids = {n.id for n in wf.nodes}
    for node in wf.nodes:
        graph.add_node(node.id)
    for node in wf.nodes:
        for port, ref in node.inputs.items():
            parts = split_ref(ref)
            if parts and parts[0] in ids:
                graph.add_edge(parts[0], node.id, ports=[*graph.get_edge_data(parts[0], node.id, {}).get(
                    "ports", []), port])
    return graph


def _check_models(wf: Workflow) -> list[Issue]:
    """Each `models:` entry against the one schema `MODEL_FIELDS` (types, choices, ranges)."""
    issues: list[Issue] = []
    for alias, spec in wf.models.items():
        issues += check_model_entry(alias, spec, wf.line_of)
        issues += check_speculative(alias, spec, wf.models, wf.line_of)
    return issues


def _check_inputs(wf: Workflow) -> list[Issue]:
    issues = []
    for name, spec in wf.inputs.items():
        line = wf.line_of("inputs", name)
        if not name.isidentifier():
            issues.append(Issue("bad_input", f"input name {name!r} is not an identifier",
                                "use letters, digits and _ (it is used as {name} in prompts)", line=line))
        if spec.type not in INPUT_TYPES:
            issues.append(Issue("bad_input", f"input {name!r} has unknown type {spec.type!r}",
                                _suggest(spec.type, list(INPUT_TYPES)), line=wf.line_of("inputs", name, "type")))
        elif spec.default is not None:
            problem = check_input_value(spec.type, spec.default)
            if problem:
                issues.append(Issue("bad_input", f"default of input {name!r} {problem}",
                                    f"give a {spec.type} default", line=wf.line_of("inputs", name, "default")))
    return issues


def check_input_value(type_: str, value: Any) -> str | None:
    if type_ == "number" and (isinstance(value, bool) or not isinstance(value, int | float)):
        return f"must be a number, got {value!r}"
    if type_ == "number" and isinstance(value, float) and not math.isfinite(value):  # 1e999, inf, nan
        return f"must be a finite number, got {value!r}"
    if type_ == "text" and not isinstance(value, str | int | float):
        return f"must be text, got {type(value).__name__}"
    surrogate = lone_surrogate(value)  # e.g. "\ud800" from JSON, or bytes that are not UTF-8 from a command line
    if surrogate is not None:
        return f"holds {surrogate[1]}, half of a surrogate pair, which is not a character"
    return None


class _NodeCheck:
    """The checks of one node of `wf.nodes`, each concern apart; `issues` collects what they find."""

    def __init__(self, wf: Workflow, registry: NodeRegistry, index: int, by_id: dict[str, NodeSpec],
                 kinds: KindMap) -> None:
        self.wf = wf
        self.registry = registry
        self.index = index
        self.by_id = by_id
        self.kinds = kinds
        self.node = wf.nodes[index]
        self.nid = self.node.id or None
        self.issues: list[Issue] = []

    def line(self, *rest: str | int) -> int | None:
        return self.wf.line_of("nodes", self.index, *rest)

    def add(self, code: str, message: str, hint: str, line: int | None) -> None:
        self.issues.append(Issue(code, message, hint, node_id=self.nid, line=line))

    def run(self) -> list[Issue]:
        self.check_id()
        cls = self.check_kind()
        if cls is None:
            return self.issues
        resolved = self.check_params(cls)
        self.check_model(cls)
        if self.node.map is not None and cls.kind != WORKFLOW_KIND:
            self.add("unknown_key", f"`map:` is for workflow nodes; {self.node.kind} has none",
                     "remove `map:` (a generator runs once per candidate with its for_each param)", self.line("map"))
        if cls.kind in CHILD_KINDS:  # its ports are the child's, checked with the child (subworkflows.py)
            bound = self.kinds.get(self.node.id)
            for port_name, ref in self.node.inputs.items():
                self.ref_resolves(port_name, ref, self.line("inputs", port_name))
            if bound is not None:
                self.check_required_inputs(bound, resolved)
            return self.issues
        for port_name, ref in self.node.inputs.items():
            self.check_wire(cls, port_name, ref)
        self.check_required_inputs(cls, resolved)
        return self.issues

    def check_id(self) -> None:
        node = self.node
        if not node.id:
            self.add("missing_id", f"node #{self.index + 1} has no id", "add `id: a_short_name`", self.line())
        elif (id_problem := node_id_problem(node.id)) is not None:
            self.add("bad_id", f"node id {node.id!r} {id_problem}", "rename the node", self.line("id"))

    def check_kind(self) -> type[NodeKind] | None:
        """The node's kind, or None (reported) when it is unknown or belongs in another section."""
        kind = self.node.kind
        cls = self.registry.get(kind)
        if cls is None:
            if not kind:
                self.add("unknown_kind", "node has no kind", f"add `kind:` ({', '.join(self.registry.kinds())})",
                         self.line())
            else:
                self.add("unknown_kind", f"unknown node kind {kind!r}", _suggest(kind, self.registry.kinds()),
                         self.line("kind"))
            return None
        if cls.section:
            self.add("io_in_nodes", f"{kind!r} nodes are declared in the `{cls.section}:` section",
                     f"move it to `{cls.section}:`", self.line("kind"))
            return None
        return cls

    def check_params(self, cls: type[NodeKind]) -> dict[str, Any]:
        """Each given param against its schema, then required and cross-param checks; returns the
        params with defaults filled in (as given: not cast, since they may be wrong)."""
        known = [p.name for p in cls.params]
        for name, value in self.node.params.items():
            param = cls.param(name)
            if param is None:
                self.add("bad_param", f"{self.node.kind} has no param {name!r}", _suggest(name, known),
                         self.line("params", name))
                continue
            problem = param.check(value)
            if problem:
                default = f"; the default is {param.default!r}" if param.default not in (None, "") else ""
                hint = f"{param.name}: {param.description}{default}" if param.description else "fix the value"
                self.add("bad_param", f"param {name!r} {problem}", hint, self.line("params", name))
        resolved = cls.resolve_params(self.node.params)
        for param in cls.params:
            if param.required and resolved.get(param.name) in (None, ""):
                self.add("bad_param", f"param {param.name!r} is required", param.description or "set it",
                         self.line("params"))
        for name, message in cls.validate_params(resolved):
            self.add("bad_param", f"param {name!r}: {message}", "see `metagen nodes` for the schema",
                     self.line("params", name))
        if cls.param("grammar") is not None or cls.param("json_schema") is not None:
            for name, message, hint in grammar_problems(resolved):
                self.add("bad_grammar", f"param {name!r}: {message}", hint, self.line("params", name))
        return resolved

    def check_model(self, cls: type[NodeKind]) -> None:
        model, models = self.node.model, self.wf.models
        if model is None or model in models:
            return
        if cls.uses_model and models:
            hint = _suggest(model, list(models)) + " Or declare it under `models:`"
        elif cls.uses_model:
            hint = "declare it under `models:` (e.g. `main: {source: bundled}`) or remove `model:`"
        else:
            hint = "declare it under `models:` or remove `model:`"
        self.add("unknown_model", f"model {model!r} is not declared", hint, self.line("model"))

    def check_wire(self, cls: type[NodeKind], port_name: str, ref: str) -> None:
        """One `inputs:` entry: the port exists, the reference resolves, the types fit."""
        line = self.line("inputs", port_name)
        port = cls.input_port(port_name)
        if port is None and not cls.variadic_inputs:
            self.add("unknown_port", f"{self.node.kind} has no input {port_name!r}",
                     _suggest(port_name, [p.name for p in cls.inputs]), line)
            return
        if not self.ref_resolves(port_name, ref, line):
            return
        source_type = ref_type(self.wf, self.registry, ref, self.by_id, self.kinds)
        target_type = port.type if port else TEXT
        if port is None and source_type is not None:
            return  # a template variable accepts any port type; it is rendered as text
        if source_type is not None and not port_compatible(source_type, target_type):
            self.add("type_mismatch", f"input {port_name!r} expects {target_type} but {ref} is {source_type}",
                     f"connect a {target_type} output, or put a node in between that converts it", line)

    def ref_resolves(self, port_name: str, ref: str, line: int | None) -> bool:
        """Whether `ref` names a declared workflow input or an existing node's output (else reported)."""
        parts = split_ref(ref)
        if parts is None:
            self.add("unknown_ref", f"input {port_name!r} = {ref!r} is not `node.port` or `inputs.name`",
                     "wire it as e.g. `think.candidates` or `inputs.question`", line)
            return False
        head, tail = parts
        wf = self.wf
        if head == "inputs":
            if tail not in wf.inputs:
                self.add("unknown_ref", f"input {port_name!r} refers to undeclared workflow input {tail!r}",
                         f"declare `{tail}` under `inputs:` or " + _suggest(tail, list(wf.inputs)), line)
                return False
            return True
        if head not in self.by_id:
            self.add("unknown_ref", f"input {port_name!r} refers to unknown node {head!r}",
                     _suggest(head, sorted(self.by_id)), line)
            return False
        src = self.by_id[head]
        if src.kind in CHILD_KINDS and head not in self.kinds:
            return False  # its child could not be used (reported): its outputs are unknown
        src_cls = self.kinds.get(head) or self.registry.get(src.kind)
        if src_cls is not None and src_cls.output_port(tail) is None:
            self.add("unknown_ref", f"node {head!r} ({src.kind}) has no output {tail!r}",
                     _suggest(tail, [p.name for p in src_cls.outputs]), line)
            return False
        return True

    def check_required_inputs(self, cls: type[NodeKind], resolved: dict[str, Any]) -> None:
        for required in cls.required_inputs(resolved):
            if required not in self.node.inputs:
                self.add("missing_input", f"input {required!r} is not connected", self.wire_hint(required),
                         self.line("inputs") or self.line())

    def wire_hint(self, port: str) -> str:
        """How to connect `port`: from another node's output of that name (a voter's `candidates` from the
        sampler's), else from the workflow input of that name, else either."""
        sources = []
        for other in self.wf.nodes:
            cls = self.kinds.get(other.id) or self.registry.get(other.kind)
            if other.id != self.node.id and cls is not None and cls.output_port(port) is not None:
                sources.append(f"{other.id}.{port}")
        if sources:
            return f"wire it from {' or '.join(f'`{s}`' for s in sources[:3])}: `inputs: {{{port}: {sources[0]}}}`"
        if port in self.wf.inputs:
            return f"wire it from the workflow input: `inputs: {{{port}: inputs.{port}}}`"
        return f"wire it: `inputs: {{{port}: inputs.{port}}}` or from another node's output"


def _check_node(wf: Workflow, registry: NodeRegistry, index: int, by_id: dict[str, NodeSpec],
                kinds: KindMap) -> list[Issue]:
    return _NodeCheck(wf, registry, index, by_id, kinds).run()


def validate(wf: Workflow, registry: NodeRegistry, children: ChildLoader | None = None) -> list[Issue]:
    """Every problem of the workflow, errors and warnings, in file order; its sub-workflows' problems follow,
    prefixed by the path of workflow nodes (children are found through `children`, else the default folders)."""
    return check(wf, registry, children).issues


def check(wf: Workflow, registry: NodeRegistry, children: ChildLoader | None = None,
          chain: tuple[tuple[str, str], ...] = (), *, memo: CheckMemo | None = None) -> Checked:
    """`validate`'s problems plus what each workflow node resolved to (the scheduler runs from it); `chain` is
    the (key, label) of each workflow above this one, for cycles and depth; `memo` the children already checked
    (one per call unless given: a folder's workflows checked with one loader may share one)."""
    checked = resolve_children(wf, registry, children, chain, check, memo)
    kinds = checked.kinds()
    issues: list[Issue] = list(wf.load_issues)
    issues += _check_models(wf)
    issues += reward_model_issues(wf)
    issues += beam_issues(wf)
    issues += _check_inputs(wf)
    seen: dict[str, int] = {}
    for i, node in enumerate(wf.nodes):
        if node.id and node.id in seen:
            issues.append(Issue("duplicate_id", f"node id {node.id!r} is used twice",
                                "give each node a unique id", node_id=node.id, line=wf.line_of("nodes", i, "id")))
        seen.setdefault(node.id, i)
    by_id: dict[str, NodeSpec] = {}
    for node in wf.nodes:
        if node.id:
            by_id.setdefault(node.id, node)
    ids = set(by_id)
    for i in range(len(wf.nodes)):
        issues += _check_node(wf, registry, i, by_id, kinds)

    graph = build_graph(wf)
    try:
        cycle = nx.find_cycle(graph)
    except nx.NetworkXNoCycle:
        cycle = []
    if cycle:
        path = " -> ".join([u for u, _ in cycle] + [cycle[0][0]])
        first = cycle[0][1]
        issues.append(Issue("cycle", f"the nodes form a cycle: {path}",
                            "a workflow must be a DAG: remove one of these connections (use a refiner for loops)",
                            node_id=first, line=wf.node_line(first, "inputs")))

    issues += _output_issues(wf, registry, by_id, kinds, ids)
    for node_id in wf.layout:
        if node_id not in ids and not node_id.startswith(("inputs.", "outputs.")):
            issues.append(Issue("bad_layout", f"layout entry {node_id!r} names no node", "delete it",
                                node_id=node_id, line=wf.line_of("layout", node_id), severity="warning"))
    issues.sort(key=lambda i: (i.file is not None, i.line or 0))
    checked.issues = issues + checked.issues
    checked.output_types = {name: ref_type(wf, registry, ref, by_id, kinds) or JSON
                            for name, ref in wf.outputs.items()}
    return checked


def _output_issues(wf: Workflow, registry: NodeRegistry, by_id: dict[str, NodeSpec], kinds: KindMap,
                   ids: Any) -> list[Issue]:
    """The problems of the workflow's `outputs:` (none declared, unwired, unknown or misspelt references)."""
    issues: list[Issue] = []
    if not wf.outputs:
        issues.append(Issue("no_outputs", "the workflow declares no outputs",
                            "add `outputs: {answer: some_node.port}`", line=wf.line_of("outputs")))
    for name, ref in wf.outputs.items():
        parts = split_ref(ref)
        line = wf.line_of("outputs", name)
        if not str(ref).strip():  # a fresh Output node of the editor: a step to take, not a mistake
            issues.append(Issue("unwired_output", f"output {name!r} is not wired yet",
                                "connect a node's output port to it (e.g. `vote.answer`); until then it stays empty",
                                line=line, severity="warning"))
        elif parts is None:
            issues.append(Issue("unknown_ref", f"output {name!r} = {ref!r} is not `node.port`",
                                "write it as e.g. `vote.answer`", line=line))
        elif parts[0] in by_id and (registry.get(by_id[parts[0]].kind) is None or (
                by_id[parts[0]].kind in CHILD_KINDS and parts[0] not in kinds)):
            continue  # the node's unknown kind (or unusable child) is already reported; its ports cannot be checked
        elif parts[0] != "inputs" and ref_type(wf, registry, ref, by_id, kinds) is None:
            target = by_id.get(parts[0])
            hint = _suggest(parts[0], sorted(ids)) if target is None else "check the port name (`metagen nodes`)"
            issues.append(Issue("unknown_ref", f"output {name!r} refers to {ref!r}, which does not exist", hint,
                                line=line))
        elif parts[0] == "inputs" and parts[1] not in wf.inputs:
            issues.append(Issue("unknown_ref", f"output {name!r} refers to undeclared input {parts[1]!r}",
                                "declare it under `inputs:`", line=line))
    return issues
