"""Hypothesis strategies of the fuzz targets: hostile values, workflow texts and data, runs, links, traces, grammars."""

from __future__ import annotations

import base64
import copy
import functools
import json
import string
import zlib
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from nodes.base import Param
from nodes.registry import default_registry

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS_DIR = ROOT / "workflows"


@functools.cache
def example_texts() -> dict[str, str]:
    """The example workflows' YAML texts by file stem."""
    return {p.stem: p.read_text(encoding="utf-8") for p in sorted(WORKFLOWS_DIR.glob("*.yaml"))}


@functools.cache
def example_data() -> dict[str, dict[str, Any]]:
    return {name: yaml.safe_load(text) for name, text in example_texts().items()}


@functools.cache
def registry() -> Any:
    return default_registry()


# ------------------------------------------------------------------ hostile scalars

SPECIAL_STRINGS = (
    "", " ", "\n", "\t", "~", "null", "yes", "no", "on", "1e999", "-.inf", ".nan", "0x1F", "0o17", "1_000",
    "inputs", "outputs", "inputs.question", "inputs.", ".port", "a.b.c", "think.candidates", "vote.answer",
    "ghost.text", "{question}", "{unknown}", "{{", "}}", "{", "}", "{0}", "{a.b}", "{candidate}", "{draft}",
    "Answer: 42", "\\boxed{7}", "Yes", "No", "No issues", "&a", "*a", "!!python/object:os.system", "<<",
    "\x00", "\x85", "\u2028", "\ufeff", "\ud800", "\udfff", "é", "𝔘𝔫𝔦", "١٢٣", "²", "🙂", "\u202e", "../x",
    "/etc/passwd", "C:\\x", "root ::= \"a\"", "(a+)+$", "(a)\\1", "[", "\\", "a" * 300,
)
"""Strings that have meant something to some parser: YAML words, refs, templates, markers, odd code points."""

HUGE_INTS = (2**31, 2**31 - 1, -(2**31), 2**53 + 1, 2**63, 2**63 - 1, -(2**63) - 1, 2**64, 10**30, -(10**40))


@functools.cache
def texts(max_size: int = 40) -> st.SearchStrategy[str]:
    """Unicode text (surrogates included), special strings, and now and then a long one."""
    return st.one_of(
        st.text(max_size=max_size),
        st.text(st.characters(codec=None), max_size=max_size),
        st.sampled_from(SPECIAL_STRINGS),
        st.builds(lambda c, n: c * n, st.sampled_from("ax{é\n"), st.integers(1_000, 20_000)),
    )


@functools.cache
def numbers() -> st.SearchStrategy[int | float]:
    return st.one_of(
        st.integers(-10, 300),
        st.integers(),
        st.sampled_from(HUGE_INTS),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from((0.0, -0.0, 1e-320, 1e308, float("inf"), float("-inf"), float("nan"))),
    )


@functools.cache
def scalars() -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), st.booleans(), numbers(), texts())


@functools.cache
def json_values(max_leaves: int = 12) -> st.SearchStrategy[Any]:
    """JSON-like data: scalars in lists and string-keyed dicts."""
    return st.recursive(scalars(), lambda inner: st.one_of(
        st.lists(inner, max_size=5), st.dictionaries(texts(12), inner, max_size=5)), max_leaves=max_leaves)


@functools.cache
def yaml_keys() -> st.SearchStrategy[Any]:
    """Mapping keys YAML allows: strings mostly, and ints, floats, bools, None."""
    return st.one_of(texts(12), st.integers(-3, 3), st.sampled_from((None, True, False, 1.5, 2**70)))


@functools.cache
def yaml_values(max_leaves: int = 12) -> st.SearchStrategy[Any]:
    """YAML data: like JSON, with keys of any scalar type."""
    return st.recursive(scalars(), lambda inner: st.one_of(
        st.lists(inner, max_size=5), st.dictionaries(yaml_keys(), inner, max_size=5)), max_leaves=max_leaves)


def nested(depth: int, leaf: Any = "x", kind: str = "list") -> Any:
    value: Any = leaf
    for _ in range(depth):
        value = [value] if kind == "list" else {"k": value}
    return value


@functools.cache
def deep_values() -> st.SearchStrategy[Any]:
    """Lists or mappings nested around and past the YAML depth limit (100)."""
    return st.builds(nested, st.integers(1, 160), st.sampled_from(("x", 1, None)), st.sampled_from(("list", "map")))


@functools.cache
def wrong_values() -> st.SearchStrategy[Any]:
    """Any value: scalars, containers, deep nesting."""
    return st.one_of(scalars(), yaml_values(8), deep_values())


# ------------------------------------------------------------------ param values


def param_values(param: Param, *, outside: bool = True) -> st.SearchStrategy[Any]:
    """Values for one node param: in range and at its bounds, and (with `outside`) just outside, of the
    wrong type, or hostile."""
    key = (id(param), outside)
    if key not in _PARAM_STRATEGIES:
        _PARAM_STRATEGIES[key] = _param_values(param, outside)
    return _PARAM_STRATEGIES[key]


_PARAM_STRATEGIES: dict[tuple[int, bool], st.SearchStrategy[Any]] = {}
"""Strategies by param (the registry's Params live as long as the process)."""


def _param_values(param: Param, outside: bool) -> st.SearchStrategy[Any]:
    t = param.type
    inside: list[st.SearchStrategy[Any]] = [st.just(param.default)]
    edges: list[Any] = []
    if t in ("int", "float"):
        low = param.min if param.min is not None else -1000
        high = param.max if param.max is not None else 1000
        if t == "int":
            inside.append(st.integers(int(low), int(min(high, low + 40))))
            inside.append(st.integers(int(low), int(high)))
            edges = [int(low) - 1, int(high) + 1, float(low), True]
        else:
            inside.append(st.floats(low, high, allow_nan=False))
            edges = [low - 1e-9, high + 1e-9, float("nan"), float("inf"), str(low)]
        inside.append(st.sampled_from([x for x in (param.min, param.max) if x is not None] or [0]))
    elif t == "choice":
        inside.append(st.sampled_from(param.choices))
        edges = [c.upper() for c in param.choices] + ["", None]
    elif t == "bool":
        inside.append(st.booleans())
        edges = ["true", 0, 1]
    elif t in ("str", "text"):
        inside.append(texts(60))
        inside.append(st.sampled_from(REGEXES))
        edges = [0, [], {"a": 1}]
    elif t == "list":
        inside.append(st.lists(texts(8), max_size=4))
        inside.append(texts(8))
        edges = [[1, 2], {"a": "b"}, 3]
    elif t == "json":
        inside.append(json_values(6))
        inside.append(st.sampled_from(SCHEMAS_INLINE))
    if not outside:
        return st.one_of(*inside)
    return st.one_of(*inside, st.sampled_from(edges or [None]), wrong_values())


REGEXES = ("", r"\d+", r"Answer:\s*(-?\d+)", "(a+)+$", "(a)\\1", "(?P<n>x)", "[", "(?=x)", "a{2,1}", "é+",
           r"\p{L}+", "(" * 300 + ")" * 300, "x" * 1000)
"""Patterns for regex params: ordinary, catastrophic for backtracking engines, refused by RE2, broken."""

SCHEMAS_INLINE = ({"type": "string"}, {"type": "object", "properties": {"a": {"type": "integer"}}},
                  '{"type": "array", "items": {"type": "number"}, "maxItems": 3}', "{not json", {"$ref": "#/x"})


# ------------------------------------------------------------------ workflow data and texts


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out += _paths(item, (*prefix, i))
    return out


def _parent(data: Any, path: tuple[Any, ...]) -> Any:
    for key in path[:-1]:
        data = data[key]
    return data


def _node_list(data: Any) -> list[dict[str, Any]]:
    nodes = data.get("nodes") if isinstance(data, dict) else None
    return [n for n in nodes if isinstance(n, dict)] if isinstance(nodes, list) else []


MUTATIONS = ("delete", "replace", "swap_type", "param", "dup_node", "cycle", "dangling", "kind", "deep", "rename",
             "top_key", "model", "output", "input_spec")


@st.composite
def mutate_data(draw: st.DrawFn, data: Any, max_mutations: int = 4) -> Any:
    """`data` (a workflow dict) after 1..max_mutations structural mutations."""
    data = copy.deepcopy(data)
    for _ in range(draw(st.integers(1, max_mutations))):
        op = draw(st.sampled_from(MUTATIONS))
        nodes = _node_list(data)
        if not isinstance(data, dict):
            data = draw(st.one_of(st.just({"version": 1, "nodes": data}), yaml_values()))
            continue
        if op in ("delete", "replace", "swap_type", "deep"):
            paths = [p for p in _paths(data) if p]
            if not paths:
                continue
            path = draw(st.sampled_from(paths))
            parent = _parent(data, path)
            if op == "delete":
                del parent[path[-1]]
            elif op == "replace":
                parent[path[-1]] = draw(wrong_values())
            elif op == "deep":
                parent[path[-1]] = draw(deep_values())
            else:
                old = parent[path[-1]]
                parent[path[-1]] = draw(st.sampled_from((str(old)[:200], [old], {"value": old}, 7, None, True)))
        elif op == "param" and nodes:
            node = draw(st.sampled_from(nodes))
            cls = registry().get(str(node.get("kind")))
            params = node.setdefault("params", {}) if isinstance(node.get("params", {}), dict) else {}
            if cls is not None and cls.params and draw(st.booleans()):
                param = draw(st.sampled_from(cls.params))
                params[param.name] = draw(param_values(param))
            else:
                params[draw(texts(12))] = draw(scalars())
        elif op == "dup_node" and nodes:
            data["nodes"].append(copy.deepcopy(draw(st.sampled_from(nodes))))
        elif op == "cycle" and nodes:
            a, b = draw(st.sampled_from(nodes)), draw(st.sampled_from(nodes))
            wiring = a.setdefault("inputs", {}) if isinstance(a.get("inputs", {}), dict) else {}
            port = draw(st.sampled_from([*wiring, "question", "candidates", "x"]))
            wiring[port] = f"{b.get('id')}.{draw(st.sampled_from(('text', 'candidates', 'answer', 'nope')))}"
        elif op == "dangling" and nodes:
            node = draw(st.sampled_from(nodes))
            wiring = node.setdefault("inputs", {}) if isinstance(node.get("inputs", {}), dict) else {}
            port = draw(st.sampled_from([*wiring, "question", draw(texts(8))]))
            wiring[port] = draw(st.sampled_from(("ghost.text", "inputs.nope", "nodot", "", ".x", "x.", "inputs.")))
        elif op == "kind" and nodes:
            node = draw(st.sampled_from(nodes))
            node["kind"] = draw(st.one_of(st.sampled_from(registry().kinds()), texts(12), scalars()))
        elif op == "rename" and nodes:
            node = draw(st.sampled_from(nodes))
            node["id"] = draw(st.one_of(st.sampled_from(("inputs", "outputs", "a.b", "9x", "x-y", "", "think")),
                                        texts(12), scalars()))
        elif op == "top_key":
            data[draw(yaml_keys())] = draw(wrong_values())
        elif op == "model":
            models = data.setdefault("models", {}) if isinstance(data.get("models", {}), dict) else {}
            spec = {draw(st.sampled_from(("source", "path", "device", "n_ctx", "threads", "n_gpu_layers",
                                          "flash_attn", "options", "bogus", 1))): draw(wrong_values())
                    for _ in range(draw(st.integers(0, 3)))}
            if draw(st.booleans()):
                spec["options"] = draw(st.dictionaries(yaml_keys(), scalars(), max_size=3))
            if draw(st.booleans()):  # speculative decoding's keys (docs/speculative.md), right and wrong
                spec["speculative"] = draw(st.one_of(wrong_values(), st.dictionaries(
                    st.sampled_from(("method", "k", "ngram", "draft", "adaptive", "bogus")),
                    st.one_of(st.sampled_from(("ngram", "draft", "main", 0, 4, 17, True)), wrong_values()),
                    max_size=4)))
            models[draw(st.one_of(st.just("main"), texts(8)))] = spec
        elif op == "output":
            outputs = data.setdefault("outputs", {}) if isinstance(data.get("outputs", {}), dict) else {}
            outputs[draw(texts(8))] = draw(st.one_of(st.sampled_from(SPECIAL_STRINGS), scalars()))
        elif op == "input_spec":
            inputs = data.setdefault("inputs", {}) if isinstance(data.get("inputs", {}), dict) else {}
            inputs[draw(st.one_of(st.just("question"), texts(8)))] = draw(st.one_of(
                scalars(), st.fixed_dictionaries({"type": st.sampled_from(("text", "number", "json", "blob")),
                                                  "default": wrong_values()})))
    return data


@st.composite
def mutated_examples(draw: st.DrawFn) -> Any:
    """An example workflow's data, mutated."""
    name = draw(st.sampled_from(sorted(example_data())))
    return draw(mutate_data(example_data()[name]))


@st.composite
def generated_workflows(draw: st.DrawFn) -> dict[str, Any]:
    """Workflow-shaped data from scratch: real keys and kinds, random values and wiring."""
    kinds = registry().kinds()
    ids = draw(st.lists(st.sampled_from(("a", "b", "c", "gen", "vote", "inputs", "x-1")), max_size=5))
    nodes = [{"id": node_id, "kind": draw(st.sampled_from(kinds)),
              "params": draw(st.dictionaries(texts(10), scalars(), max_size=3)),
              "inputs": draw(st.dictionaries(st.sampled_from(("question", "candidates", "text", "x")),
                                             st.sampled_from([f"{i}.{p}" for i in [*ids, "inputs"]
                                                              for p in ("text", "candidates", "question")]),
                                             max_size=3))} for node_id in ids]
    data: dict[str, Any] = {"version": draw(st.one_of(st.just(1), st.just(1), st.just(1), scalars())),
                            "name": draw(texts(12)),
                            "inputs": {"question": {"type": "text", "default": draw(texts(20))}}, "nodes": nodes,
                            "outputs": {"answer": draw(st.sampled_from(
                                [f"{i}.{p}" for i in [*ids, "inputs"] for p in ("text", "answer", "question")]))}}
    return data


YAML_SNIPPETS = (
    "&a ", "*a", "<<: *a\n", "x: &a [1, 2]\ny: *a\n", "!!python/object/apply:os.system ['true']",
    "!!python/name:os.system", "!!python/object:collections.OrderedDict {}", "!!binary aGVsbG8=", "!!set {a, b}",
    "!!omap [a: 1]", "!!timestamp 2001-12-14", "2001-12-14", "!!float nan", "!!int 99999", "!custom x",
    "!<tag:yaml.org,2002:str> x", "%YAML 1.1\n---\n", "%TAG ! tag:x,2000:\n---\n", "---\n", "...\n",
    "--- a\n--- b\n", "? [a, b]\n: c\n", "{[1]: 2}", "\ufeff", "\x00", "\x85", "\u2028", "\ud800", "\t",
    "9" * 5000, "1e999", ".nan", "-.inf", "'", '"', "|\n", ">-\n", "- ", ": ", "#", "[", "]", "{", "}", ",", "\\",
    '"\\ud800"', '"\\x00"', '"\\U0010ffff"', "0x" + "f" * 40, "!!int ", "!!float ", "!!bool x",
    "!!timestamp 2001-12-140", "!!timestamp 2001-13-45",
)
"""Pieces of YAML syntax to splice into a text: anchors, aliases, tags (python ones too), directives, keys."""


@st.composite
def mutate_text(draw: st.DrawFn, text: str, max_mutations: int = 3) -> str:
    """`text` after 1..max_mutations character-level edits: flips, truncation, spliced YAML syntax."""
    for _ in range(draw(st.integers(1, max_mutations))):
        op = draw(st.sampled_from(("flip", "truncate", "insert", "insert_line", "delete", "dup_line", "indent")))
        pos = draw(st.integers(0, len(text)))
        if op == "flip" and text:
            pos = min(pos, len(text) - 1)
            text = text[:pos] + draw(st.characters(codec=None)) + text[pos + 1:]
        elif op == "truncate":
            text = text[:pos]
        elif op == "insert":
            text = text[:pos] + draw(st.one_of(st.sampled_from(YAML_SNIPPETS), texts(8))) + text[pos:]
        elif op == "delete":
            text = text[:pos] + text[pos + draw(st.integers(1, 20)):]
        else:
            lines = text.split("\n")
            i = draw(st.integers(0, max(0, len(lines) - 1)))
            if op == "insert_line":
                lines.insert(i, draw(st.sampled_from(YAML_SNIPPETS)) + draw(st.sampled_from(("", " x", ": 1"))))
            elif op == "dup_line" and lines:
                lines.insert(i, lines[i])
            elif lines:
                lines[i] = draw(st.sampled_from((" ", "  ", "\t", ""))) + lines[i].lstrip(" ")
            text = "\n".join(lines)
    return text


def alias_bomb(levels: int, width: int, scalar: str) -> str:
    """A "billion laughs" document: each level is a list of `width` aliases to the previous one."""
    lines = [f"l0: &l0 [{', '.join([repr(scalar)] * width)}]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


def _dump(data: Any, unicode: bool, flow: bool | None) -> str:
    try:
        return yaml.safe_dump(data, allow_unicode=unicode, default_flow_style=flow, sort_keys=False, width=100)
    except (yaml.YAMLError, RecursionError, ValueError):
        return repr(data)


def dumped(data: st.SearchStrategy[Any]) -> st.SearchStrategy[str]:
    return st.builds(_dump, data, st.booleans(), st.sampled_from((False, None, True)))


@functools.cache
def workflow_texts() -> st.SearchStrategy[str]:
    """Whole workflow texts: random text, random YAML, generated and mutated workflows, text-mutated
    examples, alias bombs."""
    examples = st.sampled_from(sorted(example_texts().values()))
    structural = dumped(st.one_of(mutated_examples(), generated_workflows()))
    return st.one_of(
        st.text(max_size=200),
        st.text(st.sampled_from(string.printable + "&*!%@`|>-?:{}[]\u2028é\x00"), max_size=200),
        dumped(yaml_values(20)),
        dumped(deep_values()),
        structural,
        structural.flatmap(mutate_text),
        examples.flatmap(mutate_text),
        st.builds(alias_bomb, st.integers(1, 12), st.integers(1, 12), st.sampled_from(("x", "y" * 200))),
    )


# ------------------------------------------------------------------ runs on the fake backend

REPLIES = ("Answer: 42", "42", "The answer is 41.", "\\boxed{7}", "Yes", "No", "No issues", "", " ", "é" * 50,
           "Answer: 1e999", "Answer: -0", "nan", "Step 1\n\nStep 2\n\nAnswer: 3", "{\"a\": 1}", "x" * 5000)


@st.composite
def run_cases(draw: st.DrawFn) -> dict[str, Any]:
    """An example workflow with params tweaked within and just outside their ranges, input values, a seed,
    a budget and the fake backend's replies."""
    name = draw(st.sampled_from(sorted(example_data())))
    data = copy.deepcopy(example_data()[name])
    for _ in range(draw(st.integers(0, 3))):
        node = draw(st.sampled_from(_node_list(data)))
        cls = registry().get(node["kind"])
        if cls is None or not cls.params:
            continue
        param = draw(st.sampled_from(cls.params))
        outside = draw(st.integers(0, 9)) == 9
        node.setdefault("params", {})[param.name] = draw(param_values(param, outside=outside))
    inputs: dict[str, Any] = {}
    for input_name, spec in (data.get("inputs") or {}).items():
        kind = spec.get("type", "text") if isinstance(spec, dict) else "text"
        if draw(st.integers(0, 4)) == 0:
            continue  # the default
        if kind == "number":
            inputs[input_name] = draw(st.one_of(numbers(), st.sampled_from(("3", "2.5", "1e3", "x", ""))))
        elif kind == "json":
            inputs[input_name] = draw(st.one_of(json_values(6), st.sampled_from(("{}", "[1]", "{bad", ""))))
        else:
            inputs[input_name] = draw(texts(80))
    if draw(st.integers(0, 19)) == 19:
        inputs[draw(texts(8))] = "extra"
    model_text = st.text(max_size=30)  # what a model writes is decoded text: no lone surrogates
    replies = draw(st.one_of(st.none(), st.lists(st.one_of(st.sampled_from(REPLIES), model_text), min_size=1,
                                                  max_size=6)))
    budget = {"max_lm_calls": draw(st.one_of(st.integers(1, 150), st.just(400))),
              "max_tokens": draw(st.one_of(st.none(), st.integers(1, 20_000))),
              "max_seconds": draw(st.sampled_from((None, 0.05, 0.5, 3.0)))}
    return {"name": name, "data": data, "inputs": inputs, "seed": draw(st.one_of(st.integers(0, 10), st.integers())),
            "budget": budget, "replies": replies}


# ------------------------------------------------------------------ deep links

B64URL = string.ascii_letters + string.digits + "-_"


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _packed(raw: bytes, level: int, wbits: int, tail: bytes) -> str:
    compressor = zlib.compressobj(level, zlib.DEFLATED, wbits)
    return "1." + _b64(compressor.compress(raw) + compressor.flush() + tail)


@functools.cache
def example_payloads() -> tuple[str, ...]:
    from app.share.deeplink import encode_workflow

    return tuple(encode_workflow(text) for text in example_texts().values())


@st.composite
def mutate_payload(draw: st.DrawFn, payload: str) -> str:
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(("flip", "truncate", "append", "insert", "version")))
        pos = draw(st.integers(0, len(payload)))
        if op == "flip" and payload:
            pos = min(pos, len(payload) - 1)
            payload = payload[:pos] + draw(st.sampled_from(B64URL + "=+/. %é²")) + payload[pos + 1:]
        elif op == "truncate":
            payload = payload[:pos]
        elif op == "append":
            payload += draw(st.text(B64URL, max_size=20))
        elif op == "insert":
            payload = payload[:pos] + draw(st.text(max_size=4)) + payload[pos:]
        else:
            payload = draw(st.sampled_from(("0", "2", "01", "١", "²", "", "1" * 5000, "-1", " 1"))) + \
                payload[payload.find("."):] if "." in payload else payload
    return payload


@functools.cache
def payloads() -> st.SearchStrategy[str]:
    """`wf=` payloads: random, mutated real ones, crafted ones (zip bombs, foreign streams, trailing data)."""
    raw = st.one_of(st.binary(max_size=200), st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")),
                    st.sampled_from(tuple(t.encode() for t in example_texts().values())),
                    st.builds(lambda c, n: c * n, st.sampled_from((b"a", b"\xff", b"x: 1\n")),
                              st.sampled_from((1, 1000, 262_144, 262_145, 3_000_000, 20_000_000))))
    crafted = st.builds(_packed, raw, st.sampled_from((0, 1, 9)), st.sampled_from((15, -15, 31)),
                        st.sampled_from((b"", b"x", b"\x00" * 8)))
    version = st.one_of(st.sampled_from(("1", "0", "2", "01", "١", "²", "٣", "1" * 5000, "")),
                        st.text(string.digits, max_size=6), st.text(max_size=3))
    return st.one_of(
        st.text(max_size=100),
        st.builds(lambda v, b: f"{v}.{b}", version, st.text(B64URL, max_size=200)),
        st.sampled_from(example_payloads()).flatmap(mutate_payload),
        crafted,
        st.builds(lambda n: "1." + "A" * n, st.sampled_from((16_383, 16_384, 16_385, 100_000))),
    )


@functools.cache
def link_queries() -> st.SearchStrategy[dict[str, str]]:
    """Page queries: any of workflow=, wf=, run= (and others) with hostile values."""
    value = st.one_of(texts(40), payloads(), st.sampled_from(("my_flow", "best_of_n", "a" * 101, "con", ".x",
                                                               "abc123", "run-1_2", "x" * 65)))
    return st.dictionaries(st.sampled_from(("workflow", "wf", "run", "other", "")), value, max_size=3)


# ------------------------------------------------------------------ trace documents

DOC_SECTIONS = ("run", "nodes", "lm_calls", "events", "prompts", "provenance")


@functools.cache
def json_wrong_values() -> st.SearchStrategy[Any]:
    return st.one_of(scalars(), json_values(8), st.builds(nested, st.integers(1, 400)))


@st.composite
def mutate_document(draw: st.DrawFn, doc: dict[str, Any]) -> dict[str, Any]:
    """An export document after 1..4 mutations: deleted keys, wrong types, huge numbers, odd ids, duplicates."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(("delete", "replace", "replace", "dup", "run_id", "header", "inline_prompt")))
        paths = [p for p in _paths(doc) if p]
        if op in ("delete", "replace") and paths:
            path = draw(st.sampled_from(paths))
            parent = _parent(doc, path)
            if op == "delete":
                del parent[path[-1]]
            else:
                parent[path[-1]] = draw(json_wrong_values())
        elif op == "dup":
            key = draw(st.sampled_from(("nodes", "lm_calls", "events")))
            if isinstance(doc.get(key), list) and doc[key]:
                doc[key].append(copy.deepcopy(draw(st.sampled_from(doc[key]))))
        elif op == "run_id" and isinstance(doc.get("run"), dict):
            doc["run"]["id"] = draw(st.one_of(texts(20), st.sampled_from(("", "x" * 1000, "a'; DROP TABLE runs; --")),
                                              scalars()))
        elif op == "header":
            doc[draw(st.sampled_from(("format", "format_version", "schema_version")))] = draw(st.one_of(
                st.sampled_from(("metagen-trace", 1, 0, 2, -1, True, 1.0, "1")), scalars()))
        elif op == "inline_prompt" and isinstance(doc.get("lm_calls"), list) and doc["lm_calls"]:
            call = draw(st.sampled_from(doc["lm_calls"]))
            if isinstance(call, dict):
                call["prompt"] = draw(st.one_of(texts(40), json_values(4)))
    return doc


@functools.cache
def generated_documents() -> st.SearchStrategy[Any]:
    """Documents from scratch: the header right, the sections random."""
    header = st.fixed_dictionaries({"format": st.just("metagen-trace"), "format_version": st.just(1)})
    sections = st.fixed_dictionaries(
        {"run": st.one_of(st.dictionaries(texts(10), json_values(4), max_size=6).map(lambda d: {"id": "g", **d}),
                          json_values(4)),
         "nodes": st.lists(st.dictionaries(st.sampled_from(("node_id", "kind", "status", "outputs", "params",
                                                            "seq", "cache_hit", "duration_s")), json_values(4)),
                           max_size=3),
         "lm_calls": st.lists(st.dictionaries(st.sampled_from(("node_id", "prompt", "prompt_hash", "completion",
                                                               "logprobs", "tag", "seed", "start")), json_values(4)),
                              max_size=3),
         "events": st.lists(st.dictionaries(st.sampled_from(("node_id", "kind", "time", "data")), json_values(4)),
                            max_size=3)})
    documents = st.builds(lambda h, s: {**h, **s}, header, sections)
    return st.one_of(json_values(10), documents, documents)


# ------------------------------------------------------------------ grammars and JSON schemas

_RULE_NAMES = ("root", "item", "ws", "value", "a-b", "x1", "R", "undefined-rule")
_LITERAL_CHARS = st.one_of(st.sampled_from(list("ab \t{}()[]|*+?.#<>!-é🙂")),
                           st.sampled_from(("\\n", "\\t", "\\\\", '\\"', "\\x41", "\\u00e9", "\\U0001F642", "\\[",
                                            "\\]", "\\-", "\\r", "\\q", "\\x4", "\\u12", "\\")))


def _join(parts: list[str]) -> str:
    return "".join(parts)


@functools.cache
def gbnf_atoms() -> st.SearchStrategy[str]:
    literal = st.lists(_LITERAL_CHARS, max_size=6).map(lambda cs: '"' + _join(cs) + '"')
    char_class = st.builds(lambda neg, cs: "[" + ("^" if neg else "") + _join(cs) + "]", st.booleans(),
                           st.lists(st.one_of(_LITERAL_CHARS, st.sampled_from(("a-z", "0-9", "-", "^"))), max_size=5))
    token = st.sampled_from(("<[12]>", "<|im_end|>", "!<|im_end|>", "<[]>", "<[1a]>", "<", "<|x", "!<[2]>", "!x",
                             "<[9999999999]>", "<[²]>"))
    return st.one_of(literal, char_class, st.sampled_from(_RULE_NAMES), token, st.just("."))


REPETITIONS = ("", "", "", "*", "+", "?", "{2}", "{0,}", "{1,3}", "{3,1}", "{0}", "{1000}", "{1001}", "{,5}",
               "{ 2 , 4 }", "{99999999}", "{2", "{a}", "**", "{²}")


@functools.cache
def gbnf_expressions() -> st.SearchStrategy[str]:
    """A rule body: sequences and alternatives of atoms and groups, each maybe repeated, nested by recursion."""
    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        group = st.builds(lambda body, nl: "(" + nl + body + nl + ")", inner, st.sampled_from(("", "\n", " ")))
        seq = st.lists(st.one_of(inner, group), min_size=1, max_size=4).map(" ".join)
        alts = st.lists(seq, min_size=1, max_size=3).map(lambda xs: " | ".join(xs))
        return st.one_of(seq, alts)

    repeated = st.builds(lambda a, r: a + r, gbnf_atoms(), st.sampled_from(REPETITIONS))
    return st.recursive(repeated, lambda inner: st.builds(lambda e, r: e + r, extend(inner),
                                                          st.sampled_from(REPETITIONS)), max_leaves=20)


@st.composite
def gbnf_grammars(draw: st.DrawFn, define_all: bool = False) -> str:
    """A grammar: rules (usually a root) with generated bodies, comments and odd layout, then maybe edited,
    deeply nested, or random text. With `define_all`, every rule name it may use is defined (more of them
    pass the checker)."""
    names = draw(st.lists(st.sampled_from(_RULE_NAMES), min_size=1, max_size=5))
    if draw(st.integers(0, 4)) and "root" not in names:
        names.insert(0, "root")
    rules = []
    for name in names:
        sep = draw(st.sampled_from((" ::= ", "::=", " ::=\n  ", " := ", " ::= ")))
        comment = draw(st.sampled_from(("", "", "  # a comment", "#")))
        rules.append(name + sep + draw(gbnf_expressions()) + comment)
    if define_all:
        rules += [f'{name} ::= "{name}"' for name in _RULE_NAMES if name not in names]
    text = draw(st.sampled_from(("\n", "\n\n", "\r\n", "\n# between\n"))).join(rules)
    shape = draw(st.integers(0, 9))
    if shape == 0:
        depth = draw(st.sampled_from((1, 100, 255, 256, 257, 1000, 5000)))
        text = "root ::= " + "(" * depth + '"a"' + ")" * draw(st.sampled_from((depth, depth - 1, depth + 1)))
    elif shape == 1:
        text = draw(st.text(max_size=200))
    elif shape == 2:
        text = draw(mutate_text(text))
    elif shape == 3:
        text = "root ::= " + draw(st.sampled_from(('"' + "a" * 300 + '"', '"' + "a" * 5000 + '"', "[a-z]", "x",
                                                    "(x y)", '("a"{0,50})'))) + \
            draw(st.sampled_from(("{1000}", "{999,1000}", "{0,1000}", "*", "+", "{40}", "{1,2}"))) + \
            draw(st.sampled_from(("", "{1000}", "{50}", "*", "?")))
        text += "\nx ::= \"x\"\ny ::= \"y\"\n"
    elif shape == 4:
        text = chain_grammar(draw(st.integers(1, 20)), draw(st.booleans()))
    return text


def chain_grammar(levels: int, nullable: bool) -> str:
    """Rules nested `levels` deep whose alternatives begin alike, so the ways to begin double at each level:
    `r ::= s s | ""` (nullable) or `r ::= s "y" | s "z" | "x"` (ambiguous)."""
    body = '{0} {0} | ""' if nullable else '{0} "y" | {0} "z" | "x"'
    rules = ["root ::= r0"] + [f"r{i} ::= " + body.format(f"r{i + 1}") for i in range(levels)]
    return "\n".join([*rules, f'r{levels} ::= "a"'])


ISSUE_24_GRAMMAR = "\n".join((
    "root ::= e",
    'e ::= "a" e f g | "b" f g e | "c" g e f | ""',
    'f ::= "a" f g e | "b" g e f | "c" e f g | ""',
    'g ::= "a" g e f | "b" e f g | "c" f g e | ""',
))
"""The grammar that held llama.cpp's grammar engine for minutes per token (issue 24, finding 1)."""
ISSUE_24_DELAYED = 'root ::= "' + "x" * 16 + '" e\n' + ISSUE_24_GRAMMAR.split("\n", 1)[1]
"""The same rules behind 16 fixed characters: past what the checker simulates, so only the engine's bounds (cancel,
the run's cap, the per-token limit) stop it."""


@st.composite
def _ambiguous_gbnf(draw: st.DrawFn) -> tuple[str, str]:
    names = [f"r{i}" for i in range(draw(st.integers(1, 4)))]
    rules = ["root ::= " + draw(st.sampled_from(("", '"a" ', '"x" ', '"' + "x" * 16 + '" '))) + "r0"]
    for name in names:
        alts = [f'"{letter}" ' + " ".join(draw(st.lists(st.sampled_from(names), min_size=1, max_size=3)))
                for letter in draw(st.lists(st.sampled_from("abc"), min_size=1, max_size=3))]
        if draw(st.integers(0, 4)):
            alts.append('""')
        rules.append(f"{name} ::= " + " | ".join(alts))
    return "gbnf", "\n".join(rules)


@st.composite
def _ambiguous_schema(draw: st.DrawFn) -> tuple[str, str]:
    branch = {"type": "array", "items": {"$ref": "#/definitions/t"}}
    leaf = draw(st.sampled_from(({"type": "integer"}, {"type": "string"}, {"type": "null"})))
    schema = {"type": "object", "properties": {"v": {"$ref": "#/definitions/t"}}, "required": ["v"],
              "definitions": {"t": {"anyOf": [branch] * draw(st.integers(2, 5)) + [leaf]}}}
    return "schema", json.dumps(schema)


def ambiguous_grammars() -> st.SearchStrategy[tuple[str, str]]:
    """Recursive grammars whose alternatives begin alike and can be empty (llama.cpp follows every parse at once,
    so its parse stacks multiply at every character), issue 24's among them, and JSON schemas of overlapping
    recursive anyOf branches, some behind a fixed prefix longer than the checker simulates: ("gbnf" | "schema",
    text)."""
    return st.one_of(st.sampled_from((("gbnf", ISSUE_24_GRAMMAR), ("gbnf", ISSUE_24_DELAYED))), _ambiguous_gbnf(),
                     _ambiguous_schema())


@functools.cache
def json_schemas(max_leaves: int = 15) -> st.SearchStrategy[Any]:
    """Schema-shaped JSON: type/properties/items/enum/const/$ref/pattern/counts/combinators, nested."""
    types = st.sampled_from(("string", "number", "integer", "boolean", "object", "array", "null", "any", "str"))
    counts = st.one_of(st.integers(-5, 20), st.sampled_from((1000, 1001, 10**9, 1.5, -1.0, "3", True, None)))
    refs = st.sampled_from(("#/definitions/a", "#/$defs/a", "#", "#/", "#/properties/x", "https://example.com/s.json",
                            "http://x", "a.json", "#/definitions/missing", 5))
    patterns = st.one_of(st.sampled_from(REGEXES), st.sampled_from(("^a{1000}$", "^a{1001}$", "^(a{1000}){1000}$",
                                                                   "a{²}", "^[a-z]{0,5}$", "\\d{3}-\\d{4}", "x{1,}",
                                                                   "^$", "(", "a{99999999999}", ".*", "[^\\]]")),
                         texts(20))
    formats = st.sampled_from(("date", "time", "date-time", "uuid", "email", "bogus"))
    leaf = st.one_of(
        st.fixed_dictionaries({"type": st.one_of(types, st.lists(types, max_size=3))}),
        st.fixed_dictionaries({"type": st.just("string")}, optional={
            "minLength": counts, "maxLength": counts, "pattern": patterns, "format": formats}),
        st.fixed_dictionaries({"enum": st.lists(json_values(3), max_size=4)}),
        st.fixed_dictionaries({"const": json_values(3)}),
        st.fixed_dictionaries({"$ref": refs}),
        st.fixed_dictionaries({"type": st.sampled_from(("integer", "number"))},
                              optional={"minimum": numbers(), "maximum": numbers(), "exclusiveMinimum": numbers()}),
        st.booleans(),
        json_values(3),
    )

    def extend(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.one_of(
            st.fixed_dictionaries({"type": st.just("object")}, optional={
                "properties": st.dictionaries(texts(8), inner, max_size=4),
                "required": st.lists(st.one_of(st.sampled_from(("a", "b", "x")), texts(6)), max_size=3),
                "additionalProperties": st.one_of(st.booleans(), inner),
                "minProperties": counts, "maxProperties": counts}),
            st.fixed_dictionaries({"type": st.just("array")}, optional={
                "items": st.one_of(inner, st.lists(inner, max_size=3)), "prefixItems": st.lists(inner, max_size=3),
                "minItems": counts, "maxItems": counts}),
            st.dictionaries(st.sampled_from(("anyOf", "oneOf", "allOf")), st.lists(inner, max_size=3), min_size=1,
                            max_size=2),
            st.fixed_dictionaries({"definitions": st.fixed_dictionaries({"a": inner}),
                                   "$defs": st.fixed_dictionaries({"a": inner}),
                                   "$ref": refs}),
            st.fixed_dictionaries({"type": st.just("object"), "properties": st.fixed_dictionaries({"x": inner})}),
        )

    return st.recursive(leaf, extend, max_leaves=max_leaves)


@functools.cache
def schema_texts() -> st.SearchStrategy[str]:
    """JSON schema texts: generated schemas dumped, deep ones, edited ones, random text."""
    def deep(depth: int) -> str:
        return json.dumps(nested(depth, {"type": "string"}, "map")).replace('"k"', '"items"')
    dumped_schema = json_schemas().map(lambda s: json.dumps(s, ensure_ascii=False))
    return st.one_of(
        dumped_schema,
        dumped_schema,
        dumped_schema,
        dumped_schema.flatmap(lambda t: mutate_text(t, 2)),
        st.builds(deep, st.integers(1, 60)),
        st.text(max_size=100),
        st.builds(lambda n: json.dumps({"type": "string", "maxLength": n}), st.integers(0, 1500)),
    )
