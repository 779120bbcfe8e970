"""The workflow model (YAML format version 1): parse with line numbers, and a canonical, diffable dump."""

from __future__ import annotations

import copy
import hashlib
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from app.workflow.problems import Issue, WorkflowError
from app.workflow.tags import TagValue, parse_tags

FORMAT_VERSION = 1
TOP_LEVEL_KEYS = ("version", "name", "description", "tags", "provenance", "models", "inputs", "nodes", "outputs",
                  "layout")
NODE_KEYS = ("id", "kind", "model", "map", "params", "inputs")
"""`map` (workflow nodes only): the input that receives a candidate set, the child running once per candidate."""
INPUT_KEYS = ("type", "default", "description")
INPUT_TYPES = ("text", "number", "json")
MODEL_KEYS = ("source", "path", "device", "n_ctx", "threads", "n_gpu_layers", "flash_attn", "cpu_weights",
              "options", "base_url", "model", "api_key_env", "max_concurrency", "timeout_s", "context_length",
              "speculative", "pooling", "api", "repo", "quant", "file")
MAX_WORKFLOW_BYTES = 1_000_000
"""Largest workflow text (UTF-8 bytes) any entry point parses: files, the editor, links, uploads, the API."""
MAX_YAML_NODES = 20_000
"""The parse budget: YAML nodes (keys, values, items) one workflow text may have; composing stops at the first
beyond it, so a large flat document costs a bounded time and memory (the examples have under 200)."""
PARSE_SLOTS = 2
"""Workflow texts parsed at once; more wait their turn (four large parses at once would add up in memory)."""
_parse_slots = threading.BoundedSemaphore(PARSE_SLOTS)
MAX_YAML_DEPTH = 100
"""Deepest nesting of YAML collections (a JSON schema param nests about twice its own depth)."""
MAX_ALIAS_EXPANSION = 100_000
"""Most nodes that anchors/aliases may add to a document once expanded (scalars weigh 1 + 1 per 64 chars)."""

Path_ = tuple[str | int, ...]


@dataclass
class InputSpec:
    type: str = "text"
    default: Any = None
    description: str = ""


@dataclass
class NodeSpec:
    id: str
    kind: str
    model: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    inputs: dict[str, str] = field(default_factory=dict)
    map: str | None = None
    """A workflow node's mapped input (see NODE_KEYS); None for every other node."""


@dataclass
class Workflow:
    name: str = "untitled"
    description: str = ""
    tags: dict[str, TagValue] = field(default_factory=dict)
    """When to use it (app.workflow.tags): e.g. {"needs": "none", "task": ["math", "open"]}."""
    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    inputs: dict[str, InputSpec] = field(default_factory=dict)
    nodes: list[NodeSpec] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)
    layout: dict[str, list[float]] = field(default_factory=dict)
    version: int = FORMAT_VERSION
    provenance: dict[str, Any] | None = None
    """Where a generated workflow came from (`metagen tune`: dataset, model, split, dev and test figures, date);
    shown by the editor, never part of what a run does."""
    lines: dict[Path_, int] = field(default_factory=dict, repr=False, compare=False)
    """YAML line (1-based) of each key path, e.g. ("nodes", 0, "params", "n")."""
    load_issues: list[Issue] = field(default_factory=list, repr=False, compare=False)
    """Structural problems found while loading (reported by validation)."""
    source: Path | None = field(default=None, repr=False, compare=False)
    """The file it was loaded from (sub-workflows given as paths are relative to its folder); None otherwise."""

    def node(self, node_id: str) -> NodeSpec | None:
        return next((n for n in self.nodes if n.id == node_id), None)

    def node_index(self, node_id: str) -> int | None:
        return next((i for i, n in enumerate(self.nodes) if n.id == node_id), None)

    def line_of(self, *path: str | int) -> int | None:
        """Line of the deepest known prefix of `path`."""
        for end in range(len(path), 0, -1):
            line = self.lines.get(tuple(path[:end]))
            if line is not None:
                return line
        return None

    def node_line(self, node_id: str, *rest: str | int) -> int | None:
        index = self.node_index(node_id)
        return None if index is None else self.line_of("nodes", index, *rest)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"version": self.version, "name": self.name}
        if self.description:
            data["description"] = self.description
        if self.tags:
            data["tags"] = copy.deepcopy(self.tags)
        if self.provenance:
            data["provenance"] = copy.deepcopy(self.provenance)
        if self.models:
            data["models"] = copy.deepcopy(self.models)
        if self.inputs:
            data["inputs"] = {
                name: {
                    k: v
                    for k, v in (("type", spec.type), ("default", spec.default), ("description", spec.description))
                    if k == "type" or (v is not None and (k == "default" or v != ""))  # "" is a real default
                }
                for name, spec in self.inputs.items()
            }
        data["nodes"] = []
        for node in self.nodes:
            entry: dict[str, Any] = {"id": node.id, "kind": node.kind}
            if node.model:
                entry["model"] = node.model
            if node.map is not None:
                entry["map"] = node.map
            if node.params:
                entry["params"] = copy.deepcopy(node.params)
            if node.inputs:
                entry["inputs"] = dict(node.inputs)
            data["nodes"].append(entry)
        data["outputs"] = dict(self.outputs)
        if self.layout:
            data["layout"] = {k: [_tidy_number(x) for x in v] for k, v in self.layout.items()}
        return data

    def to_yaml(self) -> str:
        return dump_yaml(self.to_dict())

    def semantic_hash(self) -> str:
        """Hash of everything but name/description/tags/provenance/layout: what decides the run's results."""
        data = self.to_dict()
        for key in ("name", "description", "tags", "provenance", "layout"):
            data.pop(key, None)
        canonical = json.dumps(data, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _tidy_number(x: Any) -> Any:
    if isinstance(x, float):
        x = round(x, 1)  # then whole: 99.96 and -1e-320 would round to 100.0 and -0.0, and dump differently next time
        if x.is_integer():
            return int(x)
    return x


# ------------------------------------------------------------------ parsing


def _collect_lines(node: yaml.Node, path: Path_, out: dict[Path_, int]) -> None:
    out.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node.value)
            child = (*path, key)
            out[child] = key_node.start_mark.line + 1
            _collect_lines(value_node, child, out)
            out[child] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _collect_lines(item, (*path, i), out)


def _too_large(text: str, size: int | None = None) -> Issue | None:
    """A `too_large` issue for a text over MAX_WORKFLOW_BYTES (counted without copying a huge text); `size`
    is the known size of the whole when `text` is only its first part (a file read up to the limit)."""
    if size is None:
        size = len(text) if len(text) > MAX_WORKFLOW_BYTES else len(text.encode("utf-8", "surrogatepass"))
    if size <= MAX_WORKFLOW_BYTES:
        return None
    return Issue("too_large", f"the workflow text is {size:,} bytes; the limit is {MAX_WORKFLOW_BYTES:,} bytes "
                 f"({MAX_WORKFLOW_BYTES // 1_000_000} MB)",
                 "keep workflows small: move long texts (examples, datasets) out of the workflow", line=1)


def size_problem(text: str) -> str | None:
    """'problem (hint)' when `text` is over MAX_WORKFLOW_BYTES, else None: the check every save path runs first."""
    issue = _too_large(text)
    return None if issue is None else f"{issue.message} ({issue.hint})"


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses, while composing, nodes nested deeper than MAX_YAML_DEPTH (the composer and
    everything after it recurse once per level), and remembers where the first alias is."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0
        self.first_alias_line: int | None = None

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if self.first_alias_line is None and self.check_event(yaml.AliasEvent):
            self.first_alias_line = self.peek_event().start_mark.line + 1
        self._depth += 1
        self._nodes += 1
        try:
            if self._nodes > MAX_YAML_NODES:
                line = self.peek_event().start_mark.line + 1
                raise WorkflowError([Issue("too_large", f"the YAML has more than {MAX_YAML_NODES:,} values (keys, "
                                           "values and list items together); the limit keeps parsing bounded",
                                           "keep workflows small: move long lists (examples, data) out of the "
                                           "workflow", line=line)])
            if self._depth > MAX_YAML_DEPTH:
                line = self.peek_event().start_mark.line + 1
                raise WorkflowError([Issue("too_large", f"the YAML is nested more than {MAX_YAML_DEPTH} levels deep",
                                           "flatten the structure", line=line)])
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _node_weight(node: yaml.Node) -> int:
    """What one node costs once constructed: 1, plus 1 per 64 characters of a scalar."""
    return 1 + len(node.value) // 64 if isinstance(node, yaml.ScalarNode) else 1


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [child for pair in node.value for child in pair]
    return []


def _alias_issue(root: yaml.Node, line: int | None) -> Issue | None:
    """A `yaml_aliases` issue when anchors/aliases would expand the composed graph (where an alias is a shared
    node, not yet a copy) by more than MAX_ALIAS_EXPANSION, or make it recursive. Each node's expanded size
    is computed once (iteratively, memoized), so this costs one pass over the distinct nodes."""
    cap = MAX_ALIAS_EXPANSION * 1000  # sizes are clamped: a billion-laughs document would make huge integers
    size: dict[int, int] = {}
    open_: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    distinct = 0
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            open_.discard(key)
            size[key] = min(cap, _node_weight(node) + sum(size[id(c)] for c in _children(node)))
            distinct += _node_weight(node)
            continue
        if key in size:
            continue
        if key in open_:
            return Issue("yaml_aliases", "an alias refers to a collection that contains it (a recursive "
                         "structure); workflows cannot be recursive", "replace the alias with the value", line=line)
        open_.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in size)
    if size[id(root)] - distinct > MAX_ALIAS_EXPANSION:
        return Issue("yaml_aliases", f"anchors and aliases (&name / *name) would expand this document by more "
                     f"than {MAX_ALIAS_EXPANSION:,} nodes; aliases are limited to that much repetition",
                     "write the repeated parts out, or use fewer and smaller aliases", line=line)
    return None


def _construct(loader: _BoundedLoader, root: yaml.Node) -> Any:
    """The data of the composed document; WorkflowError where PyYAML's constructors slip on a value that does not
    fit its tag (`!!int ` raises IndexError, `!!bool x` KeyError, `!!timestamp 2001-12-140` AttributeError)."""
    try:
        return loader.construct_document(root)
    except (AttributeError, IndexError, KeyError, TypeError):
        raise WorkflowError([Issue("yaml_syntax", "YAML value cannot be read: a value does not fit its `!!` tag "
                                   "(such as !!int, !!bool or !!timestamp)", "fix the tagged value, or remove "
                                   "the tag")]) from None


def parse_yaml(text: str) -> tuple[Any, dict[Path_, int]]:
    """The data of a workflow YAML text plus a map of key path -> line, parsed once (compose, check, then
    construct from the composed nodes). Raises WorkflowError: `too_large` for a text over MAX_WORKFLOW_BYTES
    or nested over MAX_YAML_DEPTH, `yaml_aliases` when aliases would expand it by more than
    MAX_ALIAS_EXPANSION nodes (a "billion laughs") or make it recursive, `yaml_syntax` on bad YAML."""
    issue = _too_large(text)
    if issue is not None:
        raise WorkflowError([issue])
    with _parse_slots:  # parses wait their turn, as runs do
        return _parse_bounded(text)


def _parse_bounded(text: str) -> tuple[Any, dict[Path_, int]]:
    loader: _BoundedLoader | None = None
    try:
        loader = _BoundedLoader(text)
        root = loader.get_single_node()
        if root is None:
            return None, {}
        issue = _alias_issue(root, loader.first_alias_line)
        if issue is not None:
            raise WorkflowError([issue])
        lines: dict[Path_, int] = {}
        _collect_lines(root, (), lines)  # before construction, which flattens `<<:` merge keys in place
        data = _construct(loader, root)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        context = getattr(exc, "context", None)
        message = f"YAML syntax error: {problem}" + (f" ({context})" if context else "")
        raise WorkflowError(
            [Issue("yaml_syntax", message, "check indentation, colons and quotes on that line", line=line)]
        ) from None
    except WorkflowError:
        raise
    except (ValueError, OverflowError, RecursionError) as exc:  # e.g. an integer of more than 4300 digits
        raise WorkflowError([Issue("yaml_syntax", f"YAML value cannot be read: {exc}",
                                   "check the numbers and values in the file")]) from None
    finally:
        if loader is not None:
            loader.dispose()
    return data, lines


def _type_issue(what: str, expected: str, got: Any, line: int | None, node_id: str | None = None) -> Issue:
    return Issue(
        "bad_structure",
        f"{what} must be {expected}, got {type(got).__name__}",
        f"write {what} as {expected} (see workflows/ for examples)",
        node_id=node_id,
        line=line,
    )


@dataclass
class _Issues:
    """The structural problems found while loading, and the key-path -> line map to place them."""

    lines: dict[Path_, int]
    found: list[Issue] = field(default_factory=list)

    def line(self, *path: str | int) -> int | None:
        """Line of the deepest known prefix of `path` (the empty path included)."""
        for end in range(len(path), -1, -1):
            if tuple(path[:end]) in self.lines:
                return self.lines[tuple(path[:end])]
        return None

    def add(self, issue: Issue) -> None:
        self.found.append(issue)

    def unknown_keys(self, given: dict[Any, Any], allowed: tuple[str, ...], where: str, *path: str | int,
                     hint: str | None = None, node_id: str | None = None) -> None:
        """An unknown_key issue for each key of `given` not in `allowed` (`path` locates `given`)."""
        for key in given:
            if key not in allowed:
                self.add(Issue("unknown_key", f"unknown key {key!r} in {where}",
                               hint or f"allowed keys: {', '.join(allowed)}", node_id=node_id,
                               line=self.line(*path, key)))


def lone_surrogate(value: Any) -> tuple[Path_, str] | None:
    """(key path, "\\udXXX") of the first text in `value` (keys included) holding a lone surrogate, which the
    "\\ud800" escapes of YAML and JSON make but UTF-8 cannot encode (no file, trace or model can take it)."""
    stack: list[tuple[Path_, Any]] = [((), value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError as exc:
                    return path, f"\\u{ord(item[exc.start]):04x}"
        elif isinstance(item, dict):
            stack.extend(((*path, k), k) for k in item)
            stack.extend(((*path, k), v) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend(((*path, i), v) for i, v in enumerate(item))
    return None


def _surrogate_issue(data: Any, issues: _Issues) -> Issue | None:
    found = lone_surrogate(data)
    if found is None:
        return None
    path, escape = found
    where = "".join(f".{k}" if isinstance(k, str) and k.isidentifier() else f"[{k!r}]" for k in path).lstrip(".")
    return Issue("yaml_syntax", f"the text at {where or 'the top'} holds {escape}, half of a surrogate pair: "
                 "not a character", "write the character itself, or escape it whole (\\U0001F600, not "
                 "\\ud83d\\ude00)", line=issues.line(*path))


def data_too_large(data: Any) -> Issue | None:
    """A `too_large` issue when already-parsed workflow data (the editor's JSON, an API body) holds more values
    than a workflow text may (MAX_YAML_NODES), nests deeper than MAX_YAML_DEPTH or carries more text than
    MAX_WORKFLOW_BYTES: the YAML parse budget applied to data that never was YAML, checked in one bounded pass
    before anything else reads it (a 2.5 MB JSON route of 100k branches cost 6.9 s before its refusal)."""
    hint = "a workflow has at most a few hundred values; split it into sub-workflows"
    stack: list[tuple[Any, int]] = [(data, 1)]
    count = size = 0
    while stack:
        value, depth = stack.pop()
        count += 1
        if count > MAX_YAML_NODES:
            return Issue("too_large", f"the workflow holds more than {MAX_YAML_NODES:,} values", hint)
        if depth > MAX_YAML_DEPTH:
            return Issue("too_large", f"the workflow nests deeper than {MAX_YAML_DEPTH} levels", hint)
        if isinstance(value, dict):
            for key, item in value.items():
                size += len(key) if isinstance(key, str) else 8
                stack.append((item, depth + 1))
        elif isinstance(value, (list, tuple)):
            stack.extend((item, depth + 1) for item in value)
        elif isinstance(value, str):
            size += len(value)
        if size > MAX_WORKFLOW_BYTES:
            return Issue("too_large", f"the workflow carries more than {MAX_WORKFLOW_BYTES:,} characters of text",
                         hint)
    return None


def workflow_from_dict(data: Any, lines: dict[Path_, int] | None = None) -> Workflow:
    """Build a Workflow, recording structural problems in `load_issues` instead of raising where the
    rest can still be checked. Raises WorkflowError only when nothing sensible can be built."""
    issues = _Issues(lines or {})
    if data is None:
        raise WorkflowError([Issue("empty", "the workflow file is empty", "start from a file in workflows/", line=1)])
    if not isinstance(data, dict):
        raise WorkflowError([_type_issue("the workflow", "a mapping (key: value lines)", data, 1)])
    too_large = data_too_large(data)
    if too_large is not None:
        raise WorkflowError([too_large])
    surrogate = _surrogate_issue(data, issues)
    if surrogate is not None:
        raise WorkflowError([surrogate])
    version = _parse_version(data, issues)
    _check_top_level_keys(data, issues)
    wf = Workflow(version=version, lines=dict(issues.lines))
    name = data.get("name", "untitled")
    wf.name = str(name) if name is not None else "untitled"
    wf.description = str(data.get("description") or "")
    wf.tags, tag_issues = parse_tags(data.get("tags"), issues.line)
    for issue in tag_issues:
        issues.add(issue)
    wf.models = _parse_models(data.get("models") or {}, issues)
    wf.inputs = _parse_inputs(data.get("inputs") or {}, issues)
    wf.nodes = _parse_nodes(data.get("nodes") or [], issues)
    wf.outputs = _parse_outputs(data.get("outputs") or {}, issues)
    wf.layout = _parse_layout(data.get("layout") or {}, issues)
    wf.provenance = _parse_provenance(data.get("provenance"), issues)
    wf.load_issues = issues.found
    return wf


def _parse_version(data: dict[Any, Any], issues: _Issues) -> int:
    """The format version; raises WorkflowError when it is not one this code reads."""
    version = data.get("version", FORMAT_VERSION)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise WorkflowError(
            [Issue("bad_version", f"version must be a positive integer, got {version!r}", "write `version: 1`",
                   line=issues.line("version"))]
        )
    if version > FORMAT_VERSION:
        raise WorkflowError(
            [
                Issue(
                    "unsupported_version",
                    f"this workflow uses format version {version}; this Metagen Studio reads up to {FORMAT_VERSION}",
                    "upgrade metagen-studio to open it",
                    line=issues.line("version"),
                )
            ]
        )
    return version


def _check_top_level_keys(data: dict[Any, Any], issues: _Issues) -> None:
    for key in data:
        if key not in TOP_LEVEL_KEYS:
            issues.add(
                Issue(
                    "unknown_key",
                    f"unknown top-level key {key!r}",
                    f"allowed keys: {', '.join(TOP_LEVEL_KEYS)}; check the spelling or remove it",
                    line=issues.line(str(key)),
                )
            )


def _parse_models(models: Any, issues: _Issues) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    if not isinstance(models, dict):
        issues.add(_type_issue("models", "a mapping of model aliases", models, issues.line("models")))
        return out
    for alias, spec in models.items():
        if not isinstance(spec, dict):
            issues.add(_type_issue(f"models.{alias}", "a mapping like {source: bundled}", spec,
                                   issues.line("models", alias)))
            continue
        issues.unknown_keys(spec, MODEL_KEYS, f"models.{alias}", "models", alias)
        out[str(alias)] = dict(spec)
    return out


def _parse_inputs(inputs: Any, issues: _Issues) -> dict[str, InputSpec]:
    out: dict[str, InputSpec] = {}
    if not isinstance(inputs, dict):
        issues.add(_type_issue("inputs", "a mapping of input names", inputs, issues.line("inputs")))
        return out
    for name, spec in inputs.items():
        if spec is None or not isinstance(spec, dict):
            # shorthand: `question: "default text"`
            out[str(name)] = InputSpec(type="number" if isinstance(spec, int | float) and
                                       not isinstance(spec, bool) else "text", default=spec)
            continue
        issues.unknown_keys(spec, INPUT_KEYS, f"inputs.{name}", "inputs", name)
        out[str(name)] = InputSpec(
            type=str(spec.get("type", "text")),
            default=spec.get("default"),
            description=str(spec.get("description") or ""),
        )
    return out


def _parse_nodes(nodes: Any, issues: _Issues) -> list[NodeSpec]:
    if not isinstance(nodes, list):
        issues.add(_type_issue("nodes", "a list of `- id: ...` entries", nodes, issues.line("nodes")))
        return []
    out: list[NodeSpec] = []
    for i, entry in enumerate(nodes):
        if not isinstance(entry, dict):
            issues.add(_type_issue(f"nodes[{i}]", "a mapping with id and kind", entry, issues.line("nodes", i)))
            continue
        out.append(_parse_node(i, entry, issues))
    return out


def _parse_node(index: int, entry: dict[Any, Any], issues: _Issues) -> NodeSpec:
    node_id = str(entry.get("id", "")) if entry.get("id") is not None else ""
    issues.unknown_keys(entry, NODE_KEYS, "a node", "nodes", index, node_id=node_id or None,
                        hint=f"allowed node keys: {', '.join(NODE_KEYS)}; params go under `params:`")
    params = entry.get("params") or {}
    if not isinstance(params, dict):
        issues.add(_type_issue("params", "a mapping", params, issues.line("nodes", index, "params"), node_id))
        params = {}
    wiring = entry.get("inputs") or {}
    if not isinstance(wiring, dict):
        issues.add(_type_issue("inputs", "a mapping of port: node.port", wiring,
                               issues.line("nodes", index, "inputs"), node_id))
        wiring = {}
    model = entry.get("model")
    mapped = entry.get("map")
    return NodeSpec(
        id=node_id,
        kind=str(entry.get("kind", "")),
        model=str(model) if model is not None else None,
        params=dict(params),
        inputs={str(k): str(v) for k, v in wiring.items()},
        map=str(mapped) if mapped is not None else None,
    )


def _parse_outputs(outputs: Any, issues: _Issues) -> dict[str, str]:
    if not isinstance(outputs, dict):
        issues.add(_type_issue("outputs", "a mapping of name: node.port", outputs, issues.line("outputs")))
        return {}
    return {str(k): str(v) for k, v in outputs.items()}


def _parse_provenance(provenance: Any, issues: _Issues) -> dict[str, Any] | None:
    if provenance is None:
        return None
    if not isinstance(provenance, dict):
        issues.add(_type_issue("provenance", "a mapping (what made this workflow: dataset, model, figures)",
                               provenance, issues.line("provenance")))
        return None
    return dict(provenance)


def _parse_layout(layout: Any, issues: _Issues) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    if not isinstance(layout, dict):
        return out
    for node_id, pos in layout.items():
        if (isinstance(pos, list) and len(pos) == 2
                and all(isinstance(x, int | float) and not isinstance(x, bool) for x in pos)):
            out[str(node_id)] = [float(pos[0]), float(pos[1])]
        else:
            issues.add(Issue("bad_layout", f"layout of {node_id!r} must be [x, y]",
                             "write positions as `node_id: [120, 80]` or delete the entry",
                             node_id=str(node_id), line=issues.line("layout", node_id), severity="warning"))
    return out


def load_workflow_text(text: str) -> Workflow:
    data, lines = parse_yaml(text)
    return workflow_from_dict(data, lines)


def load_workflow(path: str | Path) -> Workflow:
    p = Path(path)
    try:
        with p.open(encoding="utf-8") as file:  # at most one character more than the limit: never a whole huge file
            text = file.read(MAX_WORKFLOW_BYTES + 1)
    except FileNotFoundError:
        raise WorkflowError([Issue("not_found", f"no such workflow file: {p}", "check the path")]) from None
    except OSError as exc:  # a folder, no permission...: a message, not a traceback
        raise WorkflowError([Issue("not_found", f"cannot read {p}: {exc.strerror or exc}",
                                   "give the path of a workflow .yaml file")]) from None
    except UnicodeDecodeError:
        raise WorkflowError([Issue("yaml_syntax", f"{p} is not UTF-8 text", "save the file as UTF-8")]) from None
    if len(text) > MAX_WORKFLOW_BYTES:  # only the start was read: report the file's size
        issue = _too_large(text, max(p.stat().st_size, len(text)) if p.is_file() else len(text))
        if issue is not None:
            raise WorkflowError([issue])
    wf = load_workflow_text(text)
    wf.source = p
    return wf


# ------------------------------------------------------------------ dumping


_BaseDumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
"""libyaml's emitter when available (same output, ~10x faster on big workflows)."""


class _CanonicalDumper(_BaseDumper):  # type: ignore[misc,valid-type]
    """Block style for structure; flow style for short scalar lists/maps; literal blocks for
    multi-line strings. The output is the canonical form of a workflow file."""


def _is_scalar(x: Any) -> bool:
    return x is None or isinstance(x, str | int | float | bool)


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    body = value.rstrip("\n")
    if "\n" in body and body == body.strip() and not any(line != line.rstrip() for line in body.splitlines()):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


def _represent_list(dumper: yaml.SafeDumper, value: list[Any]) -> yaml.Node:
    flow = all(_is_scalar(x) and not (isinstance(x, str) and "\n" in x) for x in value) and len(
        repr(value)) <= 80
    return dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=flow)


def _represent_dict(dumper: yaml.SafeDumper, value: dict[Any, Any]) -> yaml.Node:
    flow = (
        0 < len(value) <= 4
        and all(_is_scalar(v) and not (isinstance(v, str) and ("\n" in v or len(v) > 40)) for v in value.values())
        and len(repr(value)) <= 70
    )
    node = dumper.represent_mapping("tag:yaml.org,2002:map", value.items(), flow_style=flow)
    return node


_CanonicalDumper.add_representer(str, _represent_str)
_CanonicalDumper.add_representer(list, _represent_list)
_CanonicalDumper.add_representer(dict, _represent_dict)


def dump_yaml(data: Any) -> str:
    """The canonical YAML text of workflow data (stable: dump(load(dump(x))) == dump(x))."""
    return yaml.dump(data, Dumper=_CanonicalDumper, sort_keys=False, allow_unicode=True, width=100,
                     default_flow_style=False)


def save_workflow_atomic(wf: Workflow, path: str | Path) -> None:
    """Write the canonical YAML via a temp file + rename, so a crash never leaves half a file."""
    from app.platform.fileio import atomic_write_text

    atomic_write_text(Path(path), wf.to_yaml())
