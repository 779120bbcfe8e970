"""The semantic diff of two workflows (nodes added, removed, retyped or renamed; params old -> new; edges rewired;
inputs, outputs and models; sub-workflow changes nested under their node) and a line-per-fact text form for git."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from app.workflow.problems import WorkflowError
from app.workflow.spec import NodeSpec, Workflow, load_workflow_text

MAX_DEPTH = 5
"""Sub-workflow levels a diff descends (the studio runs at most 4)."""

CHILD_PARAM = "workflow"
BRANCHES_PARAM = "branches"


def _edges(wf: Workflow, rename: Mapping[str, str] | None = None) -> set[tuple[str, str]]:
    """(source, target) pairs: `think.candidates` -> `vote.candidates`, `vote.answer` -> `outputs.answer`; node
    ids of `rename` read as their new ids (so a renamed node's wiring is not reported as rewired)."""
    rename = rename or {}

    def ref(value: Any) -> str:
        node, dot, port = str(value).partition(".")
        return f"{rename.get(node, node)}{dot}{port}"

    out = set()
    for node in wf.nodes:
        for name, source in node.inputs.items():
            out.add((ref(source), f"{rename.get(node.id, node.id)}.{name}"))
    for name, source in wf.outputs.items():
        out.add((ref(source), f"outputs.{name}"))
    return out


def _same_body(a: NodeSpec, b: NodeSpec) -> bool:
    return a.kind == b.kind and a.params == b.params and a.model == b.model and a.map == b.map


def _renames(a: Workflow, b: Workflow) -> dict[str, str]:
    """Nodes only in `a` matched to nodes only in `b` with the same kind, params and model: renamed, not replaced."""
    b_ids = {n.id for n in b.nodes}
    a_ids = {n.id for n in a.nodes}
    added = [n for n in b.nodes if n.id not in a_ids]
    out: dict[str, str] = {}
    for old in (n for n in a.nodes if n.id not in b_ids):
        match = next((n for n in added if n.id not in out.values() and _same_body(old, n)), None)
        if match is not None:
            out[old.id] = match.id
    return out


def _child_refs(node: NodeSpec) -> dict[str, str]:
    """A workflow node's child reference, a route node's branches: {"": ref} or {"0": ref, "1": ref...}."""
    if node.kind == "workflow" and isinstance(node.params.get(CHILD_PARAM), str):
        return {"": node.params[CHILD_PARAM]}
    branches = node.params.get(BRANCHES_PARAM)
    if node.kind == "route" and isinstance(branches, list):
        return {str(i): str(b) for i, b in enumerate(branches)}
    return {}


def _load(text: str | None) -> Workflow | None:
    if text is None:
        return None
    try:
        return load_workflow_text(text)
    except WorkflowError:
        return None


def _mapping_diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    added = {k: b[k] for k in b if k not in a}
    removed = {k: a[k] for k in a if k not in b}
    changed = {k: {"old": a[k], "new": b[k]} for k in a if k in b and a[k] != b[k]}
    for key, value in (("added", added), ("removed", removed), ("changed", changed)):
        if value:
            out[key] = value
    return out


def _inputs_of(wf: Workflow) -> dict[str, Any]:
    return {name: {"type": s.type, "default": s.default, "description": s.description}
            for name, s in wf.inputs.items()}


def diff_workflows(a: Workflow, b: Workflow, children_a: Mapping[str, str] | None = None,
                   children_b: Mapping[str, str] | None = None, _depth: int = 0) -> dict[str, Any]:
    """What changed from `a` to `b`, as JSON-able data ({"same": True} and nothing else when nothing that decides
    a run changed; `meta` lists name / description / tags / layout changes apart). `children_*`: the sub-workflows'
    YAML by reference (as a version keeps them), diffed under the node that uses them."""
    children_a, children_b = dict(children_a or {}), dict(children_b or {})
    rename = _renames(a, b)
    params, subworkflows = _node_changes(a, b, children_a, children_b, _depth)
    out: dict[str, Any] = {}
    for key, value in (("nodes", _node_set_changes(a, b, rename)), ("params", params),
                       ("edges", _edge_changes(a, b, rename)),
                       ("inputs", _mapping_diff(_inputs_of(a), _inputs_of(b))),
                       ("outputs", _mapping_diff(a.outputs, b.outputs)),
                       ("models", _mapping_diff(a.models, b.models)),
                       ("subworkflows", subworkflows)):
        if value:
            out[key] = value
    meta = {k: {"old": va, "new": vb} for k, va, vb in (
        ("name", a.name, b.name), ("description", a.description, b.description), ("tags", a.tags, b.tags),
        ("layout", a.layout, b.layout), ("provenance", a.provenance, b.provenance)) if va != vb}
    result: dict[str, Any] = {"same": not out}
    result.update(out)
    if meta:
        result["meta"] = {k: ({"changed": True} if k == "layout" else v) for k, v in meta.items()}
    return result


def _node_set_changes(a: Workflow, b: Workflow, rename: Mapping[str, str]) -> dict[str, Any]:
    """Nodes added, removed, retyped (same id, another kind) and renamed."""
    a_nodes = {n.id: n for n in a.nodes}
    b_nodes = {n.id: n for n in b.nodes}
    renamed_new = set(rename.values())
    added = [{"id": n.id, "kind": n.kind} for n in b.nodes if n.id not in a_nodes and n.id not in renamed_new]
    removed = [{"id": n.id, "kind": n.kind} for n in a.nodes if n.id not in b_nodes and n.id not in rename]
    retyped = [{"id": i, "old": a_nodes[i].kind, "new": b_nodes[i].kind} for i in a_nodes
               if i in b_nodes and a_nodes[i].kind != b_nodes[i].kind]
    nodes: dict[str, Any] = {}
    for key, value in (("added", added), ("removed", removed), ("retyped", retyped),
                       ("renamed", [{"old": o, "new": n} for o, n in rename.items()])):
        if value:
            nodes[key] = value
    return nodes


def _node_changes(a: Workflow, b: Workflow, children_a: Mapping[str, str], children_b: Mapping[str, str],
                  depth: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Of the nodes both have with one kind: params (and model, map) old -> new, and their sub-workflows' diffs."""
    b_nodes = {n.id: n for n in b.nodes}
    params: list[dict[str, Any]] = []
    subworkflows: dict[str, Any] = {}
    for old in a.nodes:
        new = b_nodes.get(old.id)
        if new is None or new.kind != old.kind:
            continue
        for key in sorted(set(old.params) | set(new.params), key=str):
            before, after = old.params.get(key), new.params.get(key)
            if before != after:
                params.append({"node": old.id, "param": key, "old": before, "new": after})
        for attr in ("model", "map"):
            if getattr(old, attr) != getattr(new, attr):
                params.append({"node": old.id, "param": attr, "old": getattr(old, attr),
                               "new": getattr(new, attr)})
        if depth < MAX_DEPTH:
            subworkflows.update(_child_changes(old, new, children_a, children_b, depth))
    return params, subworkflows


def _child_changes(old: Any, new: Any, children_a: Mapping[str, str], children_b: Mapping[str, str],
                   depth: int) -> dict[str, Any]:
    """The diff of each sub-workflow one node uses in both, under `node` or `node/slot`."""
    refs_a, refs_b = _child_refs(old), _child_refs(new)
    found: dict[str, Any] = {}
    for slot in sorted(set(refs_a) & set(refs_b)):
        child_a = _load(children_a.get(refs_a[slot]))
        child_b = _load(children_b.get(refs_b[slot]))
        if child_a is None or child_b is None:
            continue
        inner = diff_workflows(child_a, child_b, children_a, children_b, depth + 1)
        if not inner.get("same"):
            found[old.id if not slot else f"{old.id}/{slot}"] = {"workflow": refs_b[slot], **inner}
    return found


def _edge_changes(a: Workflow, b: Workflow, rename: Mapping[str, str]) -> dict[str, Any]:
    """Edges added and removed (a renamed node's edges read under its new id; the outputs are diffed apart)."""
    edges_a, edges_b = _edges(a, rename), _edges(b)
    edges: dict[str, Any] = {}
    new_edges = sorted(f"{s} -> {t}" for s, t in edges_b - edges_a if not t.startswith("outputs."))
    gone = sorted(f"{s} -> {t}" for s, t in edges_a - edges_b if not t.startswith("outputs."))
    if new_edges:
        edges["added"] = new_edges
    if gone:
        edges["removed"] = gone
    return edges


def _show(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False) if len(value) <= 70 else json.dumps(
            value[:67] + "...", ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def diff_lines(diff: Mapping[str, Any], indent: str = "") -> list[str]:
    """The diff as readable lines: `+` added, `-` removed, `~` changed, old → new."""
    lines: list[str] = []
    if diff.get("same"):
        lines.append(f"{indent}no change to what runs" + (" (only " + ", ".join(diff["meta"]) + " changed)"
                                                           if diff.get("meta") else ""))
        return lines
    nodes = diff.get("nodes", {})
    for n in nodes.get("added", []):
        lines.append(f"{indent}+ node {n['id']} ({n['kind']})")
    for n in nodes.get("removed", []):
        lines.append(f"{indent}- node {n['id']} ({n['kind']})")
    for n in nodes.get("retyped", []):
        lines.append(f"{indent}~ node {n['id']}: kind {n['old']} → {n['new']}")
    for n in nodes.get("renamed", []):
        lines.append(f"{indent}~ node {n['old']} renamed {n['new']}")
    for p in diff.get("params", []):
        lines.append(f"{indent}~ {p['node']}.{p['param']}: {_show(p['old'])} → {_show(p['new'])}")
    edges = diff.get("edges", {})
    lines += [f"{indent}+ edge {e}" for e in edges.get("added", [])]
    lines += [f"{indent}- edge {e}" for e in edges.get("removed", [])]
    for section in ("inputs", "outputs", "models"):
        part = diff.get(section, {})
        label = section[:-1]
        lines += [f"{indent}+ {label} {k}: {_show(v)}" for k, v in part.get("added", {}).items()]
        lines += [f"{indent}- {label} {k}" for k in part.get("removed", {})]
        lines += [f"{indent}~ {label} {k}: {_show(v['old'])} → {_show(v['new'])}"
                  for k, v in part.get("changed", {}).items()]
    for node_id, inner in diff.get("subworkflows", {}).items():
        lines.append(f"{indent}~ node {node_id} (sub-workflow {inner.get('workflow', '')}):")
        lines += diff_lines(inner, indent + "    ")
    if diff.get("meta"):
        lines.append(f"{indent}  (also changed: {', '.join(diff['meta'])})")
    return lines


def canonical_lines(wf: Workflow, children: Mapping[str, str] | None = None, indent: str = "",
                    _depth: int = 0) -> list[str]:
    """One line per fact (`node think.n = 8`), in a stable order: what `metagen diff FILE` prints for git's
    textconv, so `git diff` shows a param change as one changed line. Sub-workflows follow their node, indented."""
    lines = [f"{indent}workflow {_show(wf.name)}"]
    if wf.description:
        lines.append(f"{indent}description {_show(wf.description)}" if len(wf.description) <= 70 else
                     f"{indent}description {json.dumps(wf.description, ensure_ascii=False)}")
    for key, value in sorted(wf.tags.items()):
        lines.append(f"{indent}tag {key} = {_show(value)}")
    for alias, spec in sorted(wf.models.items()):
        for key, value in sorted(spec.items()):
            lines.append(f"{indent}model {alias}.{key} = {_show(value)}")
    for name, spec in wf.inputs.items():
        lines.append(f"{indent}input {name} ({spec.type})" + (f" default {_json(spec.default)}"
                                                              if spec.default is not None else ""))
    for node in wf.nodes:
        lines.append(f"{indent}node {node.id} ({node.kind})" + (f" model {node.model}" if node.model else "")
                     + (f" map {node.map}" if node.map is not None else ""))
        for key in sorted(node.params, key=str):
            lines.append(f"{indent}  {node.id}.{key} = {_json(node.params[key])}")
        for name, source in node.inputs.items():
            lines.append(f"{indent}  {node.id}.{name} <- {source}")
        if children is not None and _depth < MAX_DEPTH:
            for slot, ref in _child_refs(node).items():
                child = _load(children.get(ref))
                if child is not None:
                    lines.append(f"{indent}  {node.id}{'/' + slot if slot else ''} uses {ref}:")
                    lines += canonical_lines(child, children, indent + "    ", _depth + 1)
    for name, source in wf.outputs.items():
        lines.append(f"{indent}output {name} <- {source}")
    if wf.provenance:
        lines.append(f"{indent}provenance {_json(wf.provenance)}")
    return lines


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def canonical_text(yaml_text: str, children: Mapping[str, str] | None = None) -> str:
    """`canonical_lines` of a workflow text; a text that does not load as a workflow comes back as it is (git shows
    it as text rather than failing the diff)."""
    try:
        wf = load_workflow_text(yaml_text)
    except WorkflowError:
        return yaml_text
    return "\n".join(canonical_lines(wf, children)) + "\n"
