"""A chat request for a workflow, made ready to run: its inputs from the messages (or `inputs`), the sampling
overrides mapped onto its nodes, the checks of the caller's policy, the graded output, seeds and run ids."""

from __future__ import annotations

import json
import secrets
import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from app.run.scheduler import Budget, derive_seed, resolve_inputs
from app.serve.access import Caller
from app.serve.catalog import WorkflowModel, invalid_workflow, read_workflow
from app.serve.errors import ApiError, bad_param
from app.serve.params import ApiRequest
from app.serve.run_owners import record_owner
from app.serve.tuned import TUNED_PREFIX
from app.service.errors import UserError
from app.service.studio import StudioService, issues_summary
from app.share.policy import check_workflow_allowed, resolve_model_choices
from app.workflow.problems import WorkflowError, errors
from app.workflow.spec import Workflow
from app.workflow.validation import ref_type, split_ref, validate
from nodes.registry import NodeRegistry

GRADED_OUTPUT = "answer"
OVERRIDES = ("temperature", "max_tokens")
"""Request fields mapped onto every node whose kind declares the param of the same name."""
NOT_FOR_WORKFLOWS = {"logprobs": "logprobs", "json_schema": "response_format"}
"""Request fields a workflow cannot honour (a 400); `logprobs: false` reads as no logprobs and passes."""
WARNING_HEADER = "x-metagen-warning"


def warning_text(notes: list[str]) -> str:
    """The x-metagen-warning value of some notes: one line of ASCII (a header cannot carry other characters; a
    client's model or tool name may), each note once."""
    return "; ".join(dict.fromkeys(notes)).encode("ascii", "backslashreplace").decode("ascii")


TOOLS_INPUT, CHOICE_INPUT, MESSAGES_INPUT = "tools", "tool_choice", "messages"
"""A workflow's json inputs with these names take the request's tools, tool choice and conversation."""


@dataclass(frozen=True)
class Graded:
    """The output whose text is the assistant message, and the node that makes it."""

    output: str
    node_id: str | None
    """None when the output passes a run input through."""
    port: str
    streams_tokens: bool
    """The node's tokens are the answer as it is decoded (a plain generator's text)."""


@dataclass
class PreparedRun:
    model: str
    wf: Workflow
    values: dict[str, Any]
    budget: Budget
    seeds: list[int]
    run_ids: list[str]
    graded: Graded
    overrides: dict[str, list[str]] = field(default_factory=dict)
    hide_cache_hits: bool = False
    """Callers from other machines and share mode: prefix-cache hits are not reported (see RunState)."""
    warnings: list[str] = field(default_factory=list)
    """Request fields ignored for this workflow, said in the WARNING_HEADER of the answer."""
    children: Any = None
    """Where its sub-workflows come from (a ChildLoader): a published or pinned version's own, else the studio's
    folders."""

    def headers(self) -> dict[str, str]:
        return {WARNING_HEADER: warning_text(self.warnings)} if self.warnings else {}


def graded_output(wf: Workflow, registry: NodeRegistry) -> Graded:
    """`answer` if the workflow has it, else its first text output, else its first output."""
    names = list(wf.outputs)
    texts = [n for n in names if ref_type(wf, registry, wf.outputs[n]) == "text"]
    name = GRADED_OUTPUT if GRADED_OUTPUT in wf.outputs else (texts or names)[0]
    head, port = split_ref(wf.outputs[name]) or ("inputs", name)
    if head == "inputs":
        return Graded(name, None, port, False)
    node = wf.node(head)
    streams = node is not None and node.kind == "generator" and port == "text" and \
        not (node.params or {}).get("for_each")
    return Graded(name, head, port, streams)


def apply_overrides(wf: Workflow, registry: NodeRegistry, values: dict[str, Any]) -> tuple[Workflow,
                                                                                           dict[str, list[str]]]:
    """A copy of `wf` with each given value set on the nodes whose kind declares that param, where it is in force
    (a param shown only for some method, such as a voter's judge temperature for genselect, is left alone on a
    majority voter)."""
    given = {k: v for k, v in values.items() if v is not None}
    if not given:
        return wf, {}
    touched: dict[str, list[str]] = {k: [] for k in given}
    nodes = []
    for node in wf.nodes:
        cls = registry.get(node.kind)
        params = dict(node.params or {})
        declared = {p.name for p in cls.params if _in_force(p, cls.params, params)} if cls is not None else set()
        for key, value in given.items():
            if key in declared:
                params[key] = value
                touched[key].append(node.id)
        nodes.append(replace(node, params=params))
    return replace(wf, nodes=nodes), touched


def cap_max_tokens(wf: Workflow, registry: NodeRegistry, cap: int) -> tuple[Workflow, list[str]]:
    """A copy of `wf` whose nodes generate at most `cap` tokens each: a node whose max_tokens (set or default) is
    above it is lowered to it, the others are left alone (Anthropic clients send max_tokens on every request)."""
    nodes, touched = [], []
    for node in wf.nodes:
        cls = registry.get(node.kind)
        params = dict(node.params or {})
        spec = next((p for p in cls.params if p.name == "max_tokens" and _in_force(p, cls.params, params)), None) \
            if cls is not None else None
        current = params.get("max_tokens", spec.default if spec is not None else None)
        if spec is not None and isinstance(current, int) and current > cap:
            params["max_tokens"] = cap
            touched.append(node.id)
        nodes.append(replace(node, params=params))
    return replace(wf, nodes=nodes), touched


def _in_force(param: Any, all_params: Any, values: dict[str, Any]) -> bool:
    """Whether a node's param applies with its other params as set (its `show_if` met, defaults counted)."""
    if param.show_if is None:
        return True
    other, allowed = param.show_if
    default = next((p.default for p in all_params if p.name == other), None)
    return values.get(other, default) in allowed


def answer_overrides(wf: Workflow, registry: NodeRegistry, graded: Graded,
                     values: dict[str, Any]) -> tuple[Workflow, dict[str, list[str]], list[str]]:
    """`values` (stop, top_p; None: not given) set on the node that makes the answer where its kind declares them
    (clients such as Open WebUI and LangChain send them on every request); the fields it does not take are
    ignored, each with a warning for the WARNING_HEADER."""
    given = {k: v for k, v in values.items() if v is not None}
    node = wf.node(graded.node_id) if graded.node_id else None
    cls = registry.get(node.kind) if node is not None else None
    declared = {p.name for p in cls.params} if cls is not None else set()
    taken = {k: v for k, v in given.items() if k in declared}
    where = f"node {node.id!r} ({node.kind})" if node is not None else f"input {graded.port!r}"
    warnings = [f"{key} ignored: the answer of this workflow comes from {where}, which has no {key}"
                for key in given if key not in taken]
    if node is None or not taken:
        return wf, {}, warnings
    nodes = [replace(n, params={**(n.params or {}), **taken}) if n.id == node.id else n for n in wf.nodes]
    return replace(wf, nodes=nodes), {key: [node.id] for key in taken}, warnings


def _may_be_left_out(spec: Any) -> bool:
    """A number or json input with a default, or a text input whose default is "" (as in evaluations: a text
    default like "What is 3 + 4?" is a demo value, never a stand-in for the client's question)."""
    if spec.default is None:
        return False
    return spec.type != "text" or spec.default == ""


def tool_inputs(wf: Workflow, name: str, req: ApiRequest) -> tuple[dict[str, Any], list[str]]:
    """What a workflow's json inputs named `tools`, `tool_choice` and `messages` get from the request (its tools
    as OpenAI chat function tools, the choice in chat spelling, the conversation in OpenAI chat shape), and the
    warning when the request has tools and the workflow no `tools` input."""
    values: dict[str, Any] = {}
    json_inputs = {k for k, s in wf.inputs.items() if s.type == "json"}
    if TOOLS_INPUT in json_inputs:
        values[TOOLS_INPUT] = [t.to_openai() for t in req.tools.tools]
    if CHOICE_INPUT in json_inputs:
        choice = req.tools.choice
        chosen = {"type": "function", "function": {"name": choice.name}} if choice.mode == "function" else choice.mode
        values[CHOICE_INPUT] = json.dumps(chosen)  # a json input's str value is JSON text: "auto" as "\"auto\""
    if MESSAGES_INPUT in json_inputs:
        values[MESSAGES_INPUT] = [dict(m) for m in req.messages]
    warnings = []
    if req.tools.tools and TOOLS_INPUT not in json_inputs:
        warnings.append(f"tools ignored: workflow {name!r} has no `tools` input (a json input named tools), so it "
                        "answers with text")
    return values, warnings


def workflow_inputs(wf: Workflow, name: str, req: ApiRequest) -> dict[str, Any]:
    """Input values: `inputs` first; the last user message fills the workflow's single text input; json inputs
    named tools, tool_choice and messages take the request's (`tool_inputs`)."""
    given = dict(req.inputs or {})
    unknown = sorted(set(given) - set(wf.inputs))
    if unknown:
        raise bad_param("inputs", f"workflow {name!r} has no input(s) {', '.join(unknown)}; its inputs are: "
                        f"{', '.join(wf.inputs) or 'none'}", "unknown_input")
    for key, value in tool_inputs(wf, name, req)[0].items():
        given.setdefault(key, value)
    texts = [k for k, s in wf.inputs.items() if s.type == "text"]
    last_user = next((m["content"] for m in reversed(req.messages) if m["role"] == "user"), None)
    if last_user is not None and len(texts) == 1 and texts[0] not in given:
        given[texts[0]] = last_user
    missing = [k for k, s in wf.inputs.items() if k not in given and not _may_be_left_out(s)]
    if missing:
        how = ("send a user message" if len(texts) == 1 and missing == texts else
               'send them as `inputs` in the request body (openai SDK: extra_body={"inputs": {...}}) or as '
               "metadata.inputs")
        raise ApiError(400, f"workflow {name!r} is missing input(s) {', '.join(missing)}: {how}",
                       param="messages" if missing == texts and len(texts) == 1 else "inputs",
                       code="missing_inputs", extra={"missing": missing})
    try:
        return resolve_inputs(wf, given)
    except WorkflowError as exc:
        raise bad_param("inputs", f"workflow {name!r}: {issues_summary(exc.issues)}") from None


def _check(wf: Workflow, registry: NodeRegistry, name: str, caller: Caller, children: Any = None) -> None:
    problems = errors(validate(wf, registry, children))
    if problems:
        raise invalid_workflow(name, problems)
    refused = check_workflow_allowed(wf, caller.policy)
    if refused:
        raise ApiError(403, f"workflow {name!r} cannot run for this request: {issues_summary(refused)}",
                       param="model", code="refused_by_share_mode", extra={"issues": [i.to_json() for i in refused]})


def served_children(service: StudioService, model: WorkflowModel) -> Any:
    """Where the served workflow's sub-workflows come from: a published or pinned version's own (kept with it),
    else the studio's folders (as its runs find them)."""
    if model.name.startswith(TUNED_PREFIX):
        return service.children
    try:
        _, _, texts, _ = service.served_workflow_text(model.name)
    except UserError:
        return service.children
    return service.child_loader(linked=texts) if texts else service.children


def prepare(service: StudioService, caller: Caller, model: WorkflowModel, req: ApiRequest, *,
            max_tokens_cap: bool = False) -> PreparedRun:
    """The run of `req`; with `max_tokens_cap` its max_tokens lowers the nodes' max_tokens above it instead of
    setting every node's."""
    s = req.sampling
    for attr, param in NOT_FOR_WORKFLOWS.items():
        if getattr(s, attr) not in (None, ()):
            raise bad_param(param, f"{param} is not supported for workflows (set it on the workflow's nodes); "
                            "it works with model files", "unsupported_parameter")
    wf = read_workflow(service, model)
    children = served_children(service, model)
    _check(wf, service.registry, model.name, caller, children)
    wf, overrides = apply_overrides(wf, service.registry, {"temperature": s.temperature,
                                                           "max_tokens": None if max_tokens_cap else s.max_tokens})
    if max_tokens_cap and s.max_tokens is not None:
        wf, overrides["max_tokens"] = cap_max_tokens(wf, service.registry, s.max_tokens)
    wf, on_answer, warnings = answer_overrides(wf, service.registry, graded_output(wf, service.registry),
                                               {"stop": list(s.stop) or None, "top_p": s.top_p})
    overrides.update(on_answer)
    problems = errors(validate(wf, service.registry, children))
    if problems:
        param = next((k for k in overrides if any(k in p.message for p in problems)), "max_tokens")
        raise bad_param(param, f"{param} does not fit workflow {model.name!r}: {issues_summary(problems)}")
    wf = resolve_model_choices(wf, caller.policy)
    values = workflow_inputs(wf, model.name, req)
    for key, spec in wf.inputs.items():  # the run resolves its inputs again: a json string goes as JSON text
        if spec.type == "json" and isinstance(values.get(key), str):
            values[key] = json.dumps(values[key])
    warnings = [*req.warnings, *tool_inputs(wf, model.name, req)[1], *warnings]
    graded = graded_output(wf, service.registry)
    if req.tools.active and TOOLS_INPUT in values:  # its answer may be tool calls: sent whole, not as text pieces
        graded = replace(graded, streams_tokens=False)
    base = s.seed if s.seed is not None else secrets.randbelow(2**31)
    seeds = [base if i == 0 else derive_seed(base, "choice", i) for i in range(s.n)]
    budget = caller.policy.cap_budget(None) if caller.share_rules else Budget()
    run_ids = [uuid.uuid4().hex[:12] for _ in seeds]
    record_owner(service, run_ids, caller.key)  # whose runs these are (MCP resources: only theirs to read)
    return PreparedRun(model=model.name, wf=wf, values=values, budget=budget, seeds=seeds,
                       run_ids=run_ids, graded=graded,
                       overrides={k: v for k, v in overrides.items() if v},
                       hide_cache_hits=caller.remote or caller.share_rules, warnings=warnings, children=children)
