"""The trace database's tables (sqlmodel), kept in their own registry so no other model leaks in."""

from __future__ import annotations

from sqlalchemy import Index
from sqlalchemy.orm import registry
from sqlmodel import Field, SQLModel

from app.run.status import RUNNING
from app.traces.schema_version import SCHEMA_VERSION as SCHEMA_VERSION

TRACE_REGISTRY = registry()


class TraceModel(SQLModel, registry=TRACE_REGISTRY):
    """Base of the trace tables: their own metadata, apart from any other SQLModel tables."""


class MetaRow(TraceModel, table=True):
    """Key/value facts about the database itself (schema_version, created_by)."""

    __tablename__ = "meta"
    key: str = Field(primary_key=True)
    value: str


class RunRow(TraceModel, table=True):
    """One workflow run: what was run (YAML snapshot, inputs, seed, models), how it ended, its totals."""

    __tablename__ = "runs"
    id: str = Field(primary_key=True)
    workflow: str = Field(default="", index=True)
    workflow_yaml: str = ""
    workflow_hash: str = ""
    inputs: str = "{}"
    seed: int = 0
    models: str = "{}"
    """The workflow's model specs by alias (JSON)."""
    model_ids: str = "[]"
    """Identities of the engines that answered (file name + content hash + settings), JSON list."""
    budget: str = "{}"
    status: str = Field(default=RUNNING, index=True)
    error: str | None = None
    outputs: str = "{}"
    stats: str = "{}"
    started_at: float = Field(default=0.0, index=True)
    ended_at: float | None = None
    heartbeat_at: float | None = None
    wall_s: float | None = None
    lm_calls: int = 0
    prompt_tokens: int = 0
    prompt_tokens_evaluated: int = 0
    prompt_tokens_cached: int = 0
    completion_tokens: int = 0
    nodes_run: int = 0
    nodes_cached: int = 0
    writer_pid: int | None = None
    writer_host: str | None = None
    writer_identity: str | None = None
    """What tells this writer process apart from a later one that reuses its pid (its start time)."""
    source: str = "live"
    """"live" (observed while running), "imported" (`imported_from`: its id where it was exported) or "replay"
    (`imported_from`: the bundled run it replays, `metagen replay`)."""
    imported_from: str | None = None


class NodeRunRow(TraceModel, table=True):
    """One node's execution inside a run."""

    __tablename__ = "node_runs"
    run_id: str = Field(primary_key=True)
    node_id: str = Field(primary_key=True)
    kind: str = ""
    status: str = RUNNING
    """running | succeeded | cached | failed | cancelled | skipped | interrupted."""
    cache_hit: bool = False
    params: str = "{}"
    inputs: str = "{}"
    """A preview of the inputs (candidate sets summarised; the full values are upstream outputs)."""
    outputs: str | None = None
    model: str | None = None
    seed: int | None = None
    signature: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    duration_s: float | None = None
    error: str | None = None
    cause: str | None = None
    seq: int = 0
    """Order in which the store first saw the node."""


class PromptRow(TraceModel, table=True):
    """Prompt texts, stored once however many samples share them."""

    __tablename__ = "prompts"
    hash: str = Field(primary_key=True)
    text: str


class LmCallRow(TraceModel, table=True):
    """One LM call (one sample of a generate request, one scored continuation, one choice query)."""

    __tablename__ = "lm_calls"
    __table_args__ = (Index("ix_lm_calls_run_node", "run_id", "node_id"),)
    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(index=True)
    node_id: str = ""
    call_id: str = ""
    purpose: str = ""
    model: str = ""
    sample_index: int = 0
    n: int = 1
    parent: str | None = None
    tag: str = "{}"
    prompt_hash: str = ""
    completion: str = ""
    prompt_tokens: int = 0
    prompt_tokens_evaluated: int = 0
    prompt_tokens_cached: int = 0
    completion_tokens: int = 0
    scored_tokens: int | None = None
    logprob: float | None = None
    logprobs: str | None = None
    """Per-token log-probabilities as JSON [{token, logprob, top}], when recorded."""
    seed: int | None = None
    finish_reason: str = ""
    start: float = 0.0
    end: float = 0.0
    prefill_s: float = 0.0
    decode_s: float = 0.0


class LmRequestRow(TraceModel, table=True):
    """One backend request of a run as data (backends/replay/calls.py: its canonical request and its result), what a
    run bundle carries for `metagen replay` (a table of its own: databases made before it gain it without a
    migration; runs recorded before it have no rows and cannot be bundled)."""

    __tablename__ = "lm_requests"
    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(index=True)
    node_id: str | None = None
    method: str = ""
    data: bytes = b""
    """The entry {node, method, model, request, result[, cached]} as zlib-compressed JSON."""


class NodeEventRow(TraceModel, table=True):
    """A node's own trace event (score, vote, tree, refine, adaptive_stop, note ...) with its payload."""

    __tablename__ = "node_events"
    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(index=True)
    node_id: str | None = None
    kind: str = ""
    time: float = 0.0
    data: str = "{}"


class CandidateRow(TraceModel, table=True):
    """One candidate of a candidate set a node produced: queryable without decoding node outputs."""

    __tablename__ = "candidates"
    run_id: str = Field(primary_key=True)
    node_id: str = Field(primary_key=True)
    port: str = Field(primary_key=True)
    idx: int = Field(primary_key=True)
    text: str = ""
    answer: str | None = None
    score: float | None = None
    scores: str = "{}"
    cluster: int | None = None
    winner: bool = False
    seed: int | None = None
    source: str = ""
    finish_reason: str = ""
    completion_tokens: int = 0
    meta: str = "{}"


# Core table handles, for bulk statements (the ORM classes above describe them).
RUNS = RunRow.__table__  # type: ignore[attr-defined]
NODES = NodeRunRow.__table__  # type: ignore[attr-defined]
CALLS = LmCallRow.__table__  # type: ignore[attr-defined]
PROMPTS = PromptRow.__table__  # type: ignore[attr-defined]
NODE_EVENTS = NodeEventRow.__table__  # type: ignore[attr-defined]
LM_REQUESTS = LmRequestRow.__table__  # type: ignore[attr-defined]
CANDIDATES = CandidateRow.__table__  # type: ignore[attr-defined]


class EvaluationRow(TraceModel, table=True):
    """One evaluation (metagen eval): what was evaluated on which data, how, and how it ended."""

    __tablename__ = "evaluations"
    id: str = Field(primary_key=True)
    name: str = ""
    status: str = Field(default=RUNNING, index=True)
    config: str = "{}"
    """Workflows (name, YAML, hash), dataset (path, sha256, items), metric, output, sweep, seed (JSON)."""
    estimate: str = "{}"
    error: str | None = None
    created_at: float = Field(default=0.0, index=True)
    ended_at: float | None = None
    heartbeat_at: float | None = None
    writer_pid: int | None = None
    writer_identity: str | None = None


class EvalItemRow(TraceModel, table=True):
    """One dataset item run by one workflow at one sweep point: its run, grade and cost."""

    __tablename__ = "eval_items"
    eval_id: str = Field(primary_key=True)
    workflow_idx: int = Field(primary_key=True)
    point_idx: int = Field(primary_key=True)
    item_idx: int = Field(primary_key=True)
    """The item's row index in the dataset file (0-based)."""
    run_id: str | None = None
    status: str = ""
    score: float = 0.0
    correct: bool = False
    output: str = ""
    detail: str = ""
    samples: str = "[]"
    """Per-sample correctness of the graded sampler's candidates (JSON list of bools), for pass@k."""
    prompt_tokens: int = 0
    """Prompt tokens of the run's requests as if it had run alone: with those of requests whose samples all came
    from the sample cache (not evaluated: prompt_tokens - evaluated - cached of a row with reused samples)."""
    prompt_tokens_evaluated: int = 0
    prompt_tokens_cached: int = 0
    completion_tokens: int = 0
    completion_tokens_reused: int = 0
    """Completion tokens of samples this run took from the sample cache (drawn by another point)."""
    lm_calls: int = 0
    wall_s: float = 0.0
    finished_at: float = 0.0


class EvalSampleVotesRow(TraceModel, table=True):
    """The graded sampler's per-sample answers and scores of one eval item, for maj@k / best@k curves (a table of
    its own: databases made before it gain it without a migration)."""

    __tablename__ = "eval_sample_votes"
    eval_id: str = Field(primary_key=True)
    workflow_idx: int = Field(primary_key=True)
    point_idx: int = Field(primary_key=True)
    item_idx: int = Field(primary_key=True)
    data: str = "{}"
    """JSON {"answers": [str | null], "scores": [float | null]} in sample order."""


EVALUATIONS = EvaluationRow.__table__  # type: ignore[attr-defined]
EVAL_ITEMS = EvalItemRow.__table__  # type: ignore[attr-defined]
EVAL_SAMPLE_VOTES = EvalSampleVotesRow.__table__  # type: ignore[attr-defined]


class StoredResponseRow(TraceModel, table=True):
    """A response of POST /v1/responses kept for `previous_response_id` and GET /v1/responses/{id} (a table of its
    own: databases made before it gain it without a migration)."""

    __tablename__ = "api_responses"
    id: str = Field(primary_key=True)
    owner: str = ""
    """A digest of the API key that created it ("" on a server without keys): only that key reads it."""
    model: str = ""
    run_id: str | None = None
    created_at: float = Field(default=0.0, index=True)
    previous_response_id: str | None = None
    conversation: str = "[]"
    """The messages so far as JSON [{role, content}]: earlier turns, this request's input and this answer."""
    response: str = "{}"
    """The response object as it was answered (JSON)."""


STORED_RESPONSES = StoredResponseRow.__table__  # type: ignore[attr-defined]


class RunOwnerRow(TraceModel, table=True):
    """Who started a run through the API (/v1, MCP): a digest of its API key ("" on a server without keys). Only
    that key reads the run as an MCP resource; a run with no row (the studio's own) only this machine's owner. A
    table of its own: databases made before it gain it without a migration."""

    __tablename__ = "run_owners"
    run_id: str = Field(primary_key=True)
    owner: str = ""


RUN_OWNERS = RunOwnerRow.__table__  # type: ignore[attr-defined]
