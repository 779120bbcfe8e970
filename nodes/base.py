"""Node primitives: port types, params schema, candidate sets, the node context and the node base class."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Protocol, TypeVar

from backends.base import (
    CancelToken,
    ChoiceResult,
    GenerateResult,
    LLMBackend,
    Prompt,
    RankResult,
    SamplingParams,
    ScoreResult,
    StepLogprobsResult,
)
from backends.beam_search import BeamResult, BeamSettings

R = TypeVar("R")

# ---------------------------------------------------------------- port types

TEXT = "text"
NUMBER = "number"
CANDIDATES = "candidates"
JSON = "json"
PORT_TYPES = (TEXT, NUMBER, CANDIDATES, JSON)


def port_compatible(source: str, target: str) -> bool:
    """Whether an output of type `source` may feed an input of type `target`.
    json accepts anything; a number may be used as text; everything else must match."""
    return source == target or target == JSON or (source == NUMBER and target == TEXT)


def port_compatibility() -> dict[str, list[str]]:
    """The port rule as a table (source type -> the input types it may feed), for the editor."""
    return {s: [t for t in PORT_TYPES if port_compatible(s, t)] for s in PORT_TYPES}


# ---------------------------------------------------------------- node ids

NODE_ID_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*", re.ASCII)
"""A node id: starts with a letter or _, then letters, digits, _ and - (it appears in refs `id.port`)."""
RESERVED_NODE_IDS = ("inputs", "outputs")
"""Ids that name the workflow's own sections in refs (`inputs.question`), so no node may take them."""


def node_id_problem(node_id: str) -> str | None:
    """Why `node_id` cannot be a node id, or None when it can."""
    if not NODE_ID_RE.fullmatch(node_id):
        return "must start with a letter or _ and use only letters, digits, _ and -"
    if node_id in RESERVED_NODE_IDS:
        return f"{node_id!r} is reserved for the workflow's {node_id} section"
    return None


@dataclass(frozen=True)
class Port:
    name: str
    type: str
    description: str = ""
    required: bool = True


# ---------------------------------------------------------------- params schema

PARAM_TYPES = ("int", "float", "bool", "str", "text", "choice", "list", "json")
"""text = multi-line prompt (may reference {variables}); list = list of strings; json = any mapping."""


def yaml_switch(value: Any, choices: tuple[str, ...]) -> Any:
    """YAML 1.1 reads an unquoted `on` / `off` (and yes/no) as true / false: for a choice whose words include
    "on" and "off", a bool means that word (so `think: on` works unquoted); any other value is returned as it is."""
    if isinstance(value, bool) and "on" in choices and "off" in choices:
        return "on" if value else "off"
    return value


@dataclass(frozen=True)
class Param:
    name: str
    type: str
    default: Any = None
    description: str = ""
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] = ()
    required: bool = False
    show_if: tuple[str, tuple[str, ...]] | None = None
    """Only relevant when another param has one of these values, e.g. ("method", ("regex",))."""
    max_items: int | None = None
    """A list's most strings."""
    max_chars: int | None = None
    """A list's longest string."""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["choices"] = list(self.choices)
        if self.show_if is not None:
            data["show_if"] = {"param": self.show_if[0], "values": list(self.show_if[1])}
        return data

    def check(self, value: Any) -> str | None:
        """None if `value` is acceptable, else a message saying what is wrong."""
        if value is None:
            return "is required" if self.required else None
        t = self.type
        if t == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                return f"must be an integer, got {value!r}"
        elif t == "float":
            if isinstance(value, bool) or not isinstance(value, int | float):
                return f"must be a number, got {value!r}"
            if value != value:  # NaN passes every comparison with min and max, and poisons what it touches
                return "must be a number, got NaN (.nan)"
        elif t == "bool":
            if not isinstance(value, bool):
                return f"must be true or false, got {value!r}"
        elif t in ("str", "text"):
            if not isinstance(value, str):
                return f"must be a string, got {value!r}"
        elif t == "choice":
            if yaml_switch(value, self.choices) in self.choices:
                return None
            if value not in self.choices:
                return f"must be one of {', '.join(self.choices)}; got {value!r}"
        elif t == "list":
            if isinstance(value, str):
                return self._list_bounds([value])  # a single string is accepted as a one-element list
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                return f"must be a list of strings, got {value!r}"
            return self._list_bounds(value)
        elif t == "json" and not isinstance(value, dict | list | str | int | float | bool):
            return f"must be YAML data, got {value!r}"
        if t in ("int", "float"):
            if self.min is not None and value < self.min:
                return f"must be >= {self.min:g}, got {value}"
            if self.max is not None and value > self.max:
                return f"must be <= {self.max:g}, got {value}"
        return None

    def _list_bounds(self, value: list[str]) -> str | None:
        if self.max_items is not None and len(value) > self.max_items:
            return f"takes at most {self.max_items} strings, got {len(value)}"
        longest = max((len(v) for v in value), default=0)
        if self.max_chars is not None and longest > self.max_chars:
            return f"strings may have at most {self.max_chars} characters, one has {longest}"
        return None

    def cast(self, value: Any) -> Any:
        """`value` as the declared type, for a value that check() accepts: an integer where a float is
        declared becomes a float, a single string where a list is declared a one-element list ('' none).
        Nothing else is converted: None (an optional param left empty) stays None, and a value check()
        refuses is returned as it is, never made to look valid."""
        if self.type == "float" and isinstance(value, int) and not isinstance(value, bool):
            try:
                return float(value)
            except OverflowError:  # an integer beyond any float stays an int (it compares with floats exactly)
                return value
        if self.type == "list" and isinstance(value, str):
            return [value] if value else []
        if self.type == "choice" and isinstance(value, bool):
            return yaml_switch(value, self.choices)
        return value


TEMPLATE_VAR = re.compile(r"(?<!\{)\{([A-Za-z_][A-Za-z0-9_]*)\}(?!\})")
TEMPLATE_TOKEN = re.compile(r"\{\{|\}\}|" + TEMPLATE_VAR.pattern)
"""A literal-brace escape or a {name} placeholder, for rendering in one pass."""


def template_variables(template: str) -> list[str]:
    """Names referenced as {name} in a prompt template ({{ and }} are literal braces)."""
    seen: list[str] = []
    for name in TEMPLATE_VAR.findall(template or ""):
        if name not in seen:
            seen.append(name)
    return seen


def render_template(template: str, values: dict[str, Any]) -> str:
    """Fill {name} placeholders; {{ and }} give literal braces. Unknown names raise KeyError."""

    def sub(match: re.Match[str]) -> str:
        if match.group(1) is None:  # {{ or }} in the template itself
            return match.group(0)[0]
        value = values[match.group(1)]
        return value if isinstance(value, str) else format_value(value)

    # one pass, so braces inside the filled-in values stay as they are (JSON, code, LaTeX...)
    return TEMPLATE_TOKEN.sub(sub, template)


def format_value(value: Any) -> str:
    """How a port value reads inside a prompt."""
    if isinstance(value, CandidateSet):
        return "\n\n".join(f"[{i + 1}] {c.text.strip()}" for i, c in enumerate(value.candidates))
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dict | list):
        import json

        return json.dumps(value, ensure_ascii=False)
    return str(value)


# ---------------------------------------------------------------- candidate sets


@dataclass
class Candidate:
    """One completion with its provenance, extracted answer and scores."""

    text: str
    index: int = 0
    source: str = ""
    """Node id that produced it."""
    seed: int | None = None
    answer: str | None = None
    """Canonical extracted answer (None = no extractable answer)."""
    score: float | None = None
    scores: dict[str, float] = field(default_factory=dict)
    """Per-verifier scores by verifier node id / method."""
    cluster: int | None = None
    finish_reason: str = ""
    completion_tokens: int = 0
    logprobs: list[dict[str, Any]] | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    """Free-form: verifier reasons, search depth, parent ids ..."""
    step_scores: list[float] | None = None
    """A process reward model's score of each step (the latest `method: prm` verifier's)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Candidate:
        return cls(**data)


@dataclass
class CandidateSet:
    """A set of scored completions: the `candidates` port type."""

    candidates: list[Candidate] = field(default_factory=list)
    prompt: str = ""
    winner: int | None = None
    """Index into candidates of the chosen one, once a voter decided."""
    meta: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.candidates)

    def texts(self) -> list[str]:
        return [c.text for c in self.candidates]

    def to_json(self) -> dict[str, Any]:
        return {
            "candidates": [c.to_json() for c in self.candidates],
            "prompt": self.prompt,
            "winner": self.winner,
            "meta": self.meta,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CandidateSet:
        return cls(
            candidates=[Candidate.from_json(c) for c in data.get("candidates", [])],
            prompt=data.get("prompt", ""),
            winner=data.get("winner"),
            meta=data.get("meta", {}),
        )


def to_jsonable(value: Any) -> Any:
    """A port value as plain JSON data (candidate sets become dicts tagged with __type__)."""
    if isinstance(value, CandidateSet):
        return {"__type__": "candidates", **value.to_json()}
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    return value


def from_jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        if value.get("__type__") == "candidates":
            return CandidateSet.from_json(value)
        return {k: from_jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_jsonable(v) for v in value]
    return value


# ---------------------------------------------------------------- node context


class NodeContext(Protocol):
    """What a running node may use. Implemented by the scheduler; every LM call goes through it so
    that it is traced, counted against budgets and cancellable."""

    node_id: str
    seed: int
    """This node's derived seed (deterministic given the run seed and node id)."""
    cancel: CancelToken
    run_inputs: dict[str, Any]

    def backend(self, model: str | None = None) -> LLMBackend:
        """The backend for a model alias (None = this node's model, or the workflow's first)."""
        ...

    def generate(
        self,
        prompt: Prompt,
        params: SamplingParams,
        n: int = 1,
        seeds: Sequence[int] | None = None,
        model: str | None = None,
        purpose: str = "generate",
        parent: str | None = None,
        tag: dict[str, Any] | None = None,
    ) -> GenerateResult:
        """Generate through the backend, tracing each sample as an LM call. `parent` links calls of
        a search tree; `tag` is stored with each call (e.g. {"depth": 2, "beam": 1})."""
        ...

    def score(
        self, prefix: Prompt, continuations: Sequence[str], model: str | None = None, purpose: str = "score"
    ) -> ScoreResult: ...

    def choice_logprobs(
        self, prompt: Prompt, choices: Sequence[str], model: str | None = None, purpose: str = "judge"
    ) -> ChoiceResult: ...

    def step_logprobs(
        self, sequences: Sequence[Sequence[str]], tokens: Sequence[str], model: str | None = None,
        purpose: str = "prm",
    ) -> StepLogprobsResult:
        """Log-probabilities of `tokens` after every segment of every sequence (process reward models), in one
        batched request; a model that cannot do it raises NodeError."""
        ...

    def rank(
        self, query: str, documents: Sequence[str], model: str | None = None, purpose: str = "reward",
    ) -> RankResult:
        """One score per document from a reranker / reward model, in one batched request."""
        ...

    def beam_search(
        self, prompt: Prompt, params: SamplingParams, settings: BeamSettings, model: str | None = None,
        purpose: str = "beam",
    ) -> BeamResult:
        """Token-level (diverse) beam search in one request, traced with its beam tree; a model that cannot do it
        raises NodeError."""
        ...

    def event(self, kind: str, data: dict[str, Any]) -> None:
        """Record a node-level trace event: kind in {"score", "vote", "tree", "refine", "note", ...}."""
        ...

    def progress(self, done: float, total: float, message: str = "") -> None: ...

    def allow_python(self) -> bool:
        """Whether the python verifier may run (off in share mode unless the owner allows it)."""
        ...

    def allow_code_execution(self) -> bool:
        """Whether candidates' code may run (`method: tests` / `behaviour`; off in share mode unless allowed)."""
        ...

    def code_limit_caps(self) -> tuple[float, int] | None:
        """The most (timeout_s, memory_mb) one candidate program may have (share mode: the owner's flags)."""
        ...

    def map(self, fn: Callable[[Any], R], items: Sequence[Any], *, limit: int | None = None) -> list[R]:
        """`fn` over `items` as concurrent requests, so the engine decodes them as one batch (at most what the
        run's engines batch at once, and `limit`); the results in the items' order. A cancelled run (or one at its
        cap) starts no further item and raises its stop; else the first exception in the items' order is raised
        once the items already running ended. Never start a thread pool in a node: this is the run's."""
        ...

    def run_workflow(self, runs: Sequence[dict[str, Any]], mapped: bool,
                     branch: int | None = None) -> list[dict[str, Any]]:
        """A workflow node's child, once per inputs dict of `runs`, all at once, inside this run (same budget,
        cancel and engines); the outputs of each. `mapped` numbers the child runs in their node ids (`w/2/x`);
        `branch` names a route node's branch to run (its node ids `r/1/x`)."""
        ...


# ---------------------------------------------------------------- node kinds


class NodeError(RuntimeError):
    """A node failed for a reason the user can act on."""


class NodeKind:
    """Base class of node kinds. Subclasses set the class attributes and implement run()."""

    kind: ClassVar[str]
    title: ClassVar[str]
    category: ClassVar[str]
    """Palette group: "io", "generate", "score", "aggregate", "search", "text"."""
    description: ClassVar[str]
    inputs: ClassVar[tuple[Port, ...]] = ()
    outputs: ClassVar[tuple[Port, ...]] = ()
    params: ClassVar[tuple[Param, ...]] = ()
    variadic_inputs: ClassVar[bool] = False
    """True when extra named inputs (template {variables}) are accepted besides `inputs`."""
    uses_model: ClassVar[bool] = False
    reserved_vars: ClassVar[tuple[str, ...]] = ()
    """Template variables the node fills in itself (e.g. {candidate}); never required as wired inputs."""
    section: ClassVar[str | None] = None
    """"inputs" / "outputs" for the kinds that stand for the workflow's inputs:/outputs: sections."""

    @classmethod
    def param(cls, name: str) -> Param | None:
        return next((p for p in cls.params if p.name == name), None)

    @classmethod
    def input_port(cls, name: str) -> Port | None:
        return next((p for p in cls.inputs if p.name == name), None)

    @classmethod
    def output_port(cls, name: str) -> Port | None:
        return next((p for p in cls.outputs if p.name == name), None)

    @classmethod
    def resolve_params(cls, given: dict[str, Any]) -> dict[str, Any]:
        """Params with defaults filled in."""
        out = {p.name: p.default for p in cls.params}
        out.update(given)
        return out

    @classmethod
    def typed_params(cls, given: dict[str, Any]) -> dict[str, Any]:
        """The params a run gets: defaults filled in (also for an explicit null), then each value cast to its
        declared type once (Param.cast), so that nodes read `params["n"]` as an int and `params["temperature"]`
        as a float. Meant for validated params (the scheduler runs only valid workflows); validation itself uses
        resolve_params, whose values are as written."""
        out = cls.resolve_params(given)
        for p in cls.params:
            value = p.default if out[p.name] is None else out[p.name]  # `null` leaves an optional param at its default
            out[p.name] = p.cast(value)
        return out

    @classmethod
    def required_inputs(cls, params: dict[str, Any]) -> list[str]:
        """Input names that must be wired, given the params (template variables included)."""
        names = [p.name for p in cls.inputs if p.required]
        for p in cls.params:
            if p.type == "text" and cls.variadic_inputs:
                text = params.get(p.name)
                for var in template_variables(text if isinstance(text, str) else ""):
                    if var not in names and var not in cls.reserved_vars:
                        names.append(var)
        return names

    @classmethod
    def validate_params(cls, params: dict[str, Any]) -> list[tuple[str, str]]:
        """Extra cross-param checks beyond each Param's own: list of (param, message)."""
        return []

    @classmethod
    def schema(cls) -> dict[str, Any]:
        return {
            "kind": cls.kind,
            "title": cls.title,
            "category": cls.category,
            "description": cls.description,
            "inputs": [asdict(p) for p in cls.inputs],
            "outputs": [asdict(p) for p in cls.outputs],
            "params": [p.to_json() for p in cls.params],
            "variadic_inputs": cls.variadic_inputs,
            "uses_model": cls.uses_model,
            "reserved_vars": list(cls.reserved_vars),
            "section": cls.section,
        }

    def run(self, inputs: dict[str, Any], params: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
        """Compute the outputs from inputs (by port name) and resolved params."""
        raise NotImplementedError
