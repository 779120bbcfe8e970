"""Share/demo-mode policy: what visitors of a reachable app may do (names not paths, model list, caps)."""

from __future__ import annotations

import ipaddress
import logging
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from app.run.scheduler import Budget
from app.workflow.model_specs import model_int
from app.workflow.problems import Issue
from app.workflow.spec import Workflow
from app.workflow.subworkflows import Checked, child_runs, descendants, prefixed
from backends.llama.models.gguf import find_model_files

log = logging.getLogger(__name__)

SHARE_MODE_ENV = "METAGEN_SHARE_MODE"

# Server-side caps applied to every run in share mode (a visitor's budget can only be lower).
SHARE_MAX_LM_CALLS = 64
SHARE_MAX_TOKENS = 20_000
SHARE_MAX_SECONDS = 120.0
SHARE_MAX_CHILD_RUNS = 256
"""Share mode: sub-workflow runs one run may start (a mapped child counts once per candidate, nested levels
multiply); validation refuses a tree whose count is known to pass it, the run stops when it would."""
SHARE_MAX_CONCURRENT_RUNS = 1
SHARE_MAX_QUEUE = 8
SHARE_MAX_RUNS_PER_VISITOR = 2
"""Share mode: unfinished runs (running or waiting) one visitor may have; more are refused until one ends."""
SHARE_MAX_N_CTX = 8192
SHARE_MAX_THREADS = 4
SHARE_MAX_PARTICLES = 16
"""Share mode: the most particles a search node's particle filter may keep (each draws a step per round)."""
SHARE_MAX_PRM_STEPS = 64
"""Share mode: the most steps a PRM scores per candidate (`max_steps`; the chat layout is a turn per step)."""
SHARE_MAX_SIMULATIONS = 32
"""Share mode: the most MCTS simulations of a search node (each expands and rolls out to the end)."""
SHARE_MAX_AB_EXPANSIONS = 64
"""Share mode: the most steps an AB-MCTS search makes (`max_expansions`; each is a sample and a score)."""
SHARE_MAX_BEAMS = 16
"""Share mode: a sampler's `method: beam` width n (each beam is a sequence of the shared engine)."""
SHARE_MAX_INPUT_CHARS = 100_000
"""Share mode: characters one run input may have (all of a run's inputs together); the owner sets another with
--max-input-chars. A run's inputs are stored in its trace and repeated in its prompts."""
SHARE_MAX_UPLOAD_MB = 20
SHARE_MAX_CODE_SECONDS = 10.0
"""Share mode: the most `timeout_s` a candidate program (method: tests / behaviour) may have."""
SHARE_MAX_CODE_MEMORY_MB = 512
"""Share mode: the most `memory_mb` a candidate program may have."""
"""Share mode: the largest file Gradio accepts on /gradio_api/upload (--max-upload-mb)."""
SHARE_MEMORY_FRACTION = 8
"""Share mode: the model pool may hold 1/8 of the machine's RAM (at least 1 GiB; $METAGEN_POOL_MEMORY overrides)."""

# Model settings a visitor may set on a model; anything else (e.g. `options`, which reach llama.cpp
# constructor kwargs such as lora paths) is refused in share mode.
_SHARE_MODEL_KEYS = {"source", "path", "device", "n_ctx", "threads", "n_gpu_layers", "flash_attn"}


def env_share_mode() -> bool:
    """True when $METAGEN_SHARE_MODE forces share mode on (for testing share mode on localhost)."""
    return os.environ.get(SHARE_MODE_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


def is_loopback_host(host: str) -> bool:
    """Whether binding to `host` keeps the app reachable from this machine only."""
    host = host.strip().strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_auth(value: str) -> tuple[str, str]:
    """'user:password' -> (user, password); a clear ValueError otherwise."""
    user, sep, password = value.partition(":")
    if not sep or not user.strip() or not password:
        raise ValueError("auth must be written USER:PASSWORD (both non-empty), e.g. --auth ada:s3cret")
    return user.strip(), password


def load_auth_file(path: Path) -> list[tuple[str, str]]:
    """One USER:PASSWORD per line; blank lines and lines starting with # are ignored."""
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read the auth file {path}: {exc.strerror or exc}") from None
    pairs: list[tuple[str, str]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            pairs.append(parse_auth(line))
        except ValueError:
            raise ValueError(f"{path}:{number}: expected USER:PASSWORD on each line") from None
    if not pairs:
        raise ValueError(f"the auth file {path} holds no USER:PASSWORD line")
    return pairs


@dataclass(frozen=True)
class RemoteChoice:
    """A remote model the owner offers in share mode (`--remote-model NAME=URL#MODEL[#KEY_ENV]`): visitors name it,
    never an address; the API key comes from the owner's environment variable."""

    name: str
    base_url: str
    model: str
    api_key_env: str | None = None

    def spec(self) -> dict[str, Any]:
        """The `models:` entry a visitor's entry is replaced by."""
        return {"source": "openai", "base_url": self.base_url, "model": self.model,
                **({"api_key_env": self.api_key_env} if self.api_key_env else {})}


_REMOTE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_ENV_VAR = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
REMOTE_MODEL_FORM = "NAME=URL#MODEL or NAME=URL#MODEL#KEY_ENV, e.g. demo=http://10.0.0.5:8080/v1#qwen2.5-7b#DEMO_KEY"


def parse_remote_model(text: str) -> RemoteChoice:
    """`NAME=URL#MODEL[#KEY_ENV]` -> RemoteChoice; ValueError saying what to fix."""
    name, eq, rest = str(text).partition("=")
    parts = rest.split("#")
    if not eq or len(parts) not in (2, 3) or not all(p.strip() for p in parts):
        raise ValueError(f"--remote-model {text!r}: write {REMOTE_MODEL_FORM}")
    name, url, model = name.strip(), parts[0].strip().rstrip("/"), parts[1].strip()
    key_env = parts[2].strip() if len(parts) == 3 else None
    if not _REMOTE_NAME.fullmatch(name):
        raise ValueError(f"--remote-model {text!r}: the name {name!r} must be letters, digits, '.', '_' or '-'")
    if not re.fullmatch(r"https?://[^\s/?#@]+(/[^\s?#]*)?", url):
        raise ValueError(f"--remote-model {text!r}: {url!r} is not an http:// or https:// URL (no user@ part)")
    if key_env is not None and not _ENV_VAR.fullmatch(key_env):
        raise ValueError(f"--remote-model {text!r}: {key_env!r} is not an environment variable name (give the "
                         "variable's name, never the key itself)")
    return RemoteChoice(name=name, base_url=url, model=model, api_key_env=key_env)


_REMOTE_VISITOR_KEYS = {"source", "base_url", "model", "api_key_env"}
"""What a visitor's `source: openai` entry may say in share mode: which of the owner's remote models it means."""


@dataclass(frozen=True)
class SharePolicy:
    """What the app allows its users; `local()` for the owner alone, `for_serving()` when it may be shared."""

    share_mode: bool = False
    allow_python: bool = True
    allow_code_execution: bool = True
    """Whether candidates' code may run (`method: tests` verifiers, `method: behaviour` voters)."""
    max_lm_calls: int | None = None
    max_tokens: int | None = None
    max_seconds: float | None = None
    max_child_runs: int | None = None
    """Sub-workflow runs one run may start (None: the scheduler's MAX_CHILD_RUNS)."""
    max_concurrent_runs: int = 2
    max_queue: int = 32
    max_runs_per_visitor: int | None = None
    """Unfinished runs one visitor may have at once (None: no limit, the owner's local mode)."""
    model_choices: tuple[str, ...] = ()
    """Model files (absolute paths) a share-mode visitor may pick; `bundled` is always allowed."""
    auth: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    """(user, password) pairs; empty means no login is asked."""
    max_n_ctx: int | None = None
    max_threads: int | None = None
    max_input_chars: int | None = None
    """Characters a run's inputs may have together (None: no limit)."""
    max_upload_bytes: int | None = None
    """Largest file upload the web server accepts (None: Gradio's default, no limit)."""
    memory_budget_bytes: int | None = None
    """The model pool's memory budget (None: the pool's default, half the RAM)."""
    remote_choices: tuple[RemoteChoice, ...] = ()
    """Share mode: the remote models the owner offers (`--remote-model`); any other remote server is refused."""
    max_code_seconds: float | None = None
    """The most `timeout_s` a candidate program may have (None: the workflow's own; `--cap-code-seconds`)."""
    max_code_memory_mb: int | None = None
    """The most `memory_mb` a candidate program may have (None: the workflow's own; `--cap-code-memory-mb`)."""

    @classmethod
    def local(cls, *, allow_python: bool = True) -> SharePolicy:
        """The owner on their own machine: no caps, any path, python verifier allowed."""
        return cls(share_mode=False, allow_python=allow_python)

    @classmethod
    def for_serving(
        cls,
        host: str = "127.0.0.1",
        share: bool = False,
        allow_python: bool = False,
        *,
        allow_code_execution: bool = False,
        force_share_mode: bool | None = None,
        auth: Iterable[tuple[str, str]] = (),
        model_choices: Iterable[str] | None = None,
        models_folder: Path | None = None,
        max_lm_calls: int = SHARE_MAX_LM_CALLS,
        max_tokens: int = SHARE_MAX_TOKENS,
        max_seconds: float = SHARE_MAX_SECONDS,
        max_concurrent_runs: int = SHARE_MAX_CONCURRENT_RUNS,
        max_queue: int = SHARE_MAX_QUEUE,
        max_input_chars: int = SHARE_MAX_INPUT_CHARS,
        max_upload_mb: float = SHARE_MAX_UPLOAD_MB,
        remote_choices: Iterable[RemoteChoice] = (),
        max_code_seconds: float = SHARE_MAX_CODE_SECONDS,
        max_code_memory_mb: int = SHARE_MAX_CODE_MEMORY_MB,
    ) -> SharePolicy:
        """Share mode is on when share=True, the host is not loopback, or it is forced (flag or
        $METAGEN_SHARE_MODE). Off share mode this is `local()` (python allowed) plus the given auth."""
        forced = env_share_mode() if force_share_mode is None else force_share_mode
        shared = bool(share) or not is_loopback_host(host) or forced
        auth_pairs = tuple((str(u), str(p)) for u, p in auth)
        if not shared:
            return replace(cls.local(), auth=auth_pairs)
        if model_choices is None:
            from app.platform.paths import models_dir

            model_choices = find_model_files(models_folder if models_folder is not None else models_dir())
        return cls(
            share_mode=True,
            allow_python=allow_python,
            allow_code_execution=allow_code_execution,
            max_lm_calls=max_lm_calls,
            max_tokens=max_tokens,
            max_seconds=max_seconds,
            max_child_runs=SHARE_MAX_CHILD_RUNS,
            max_concurrent_runs=max(1, max_concurrent_runs),
            max_queue=max(0, max_queue),
            max_runs_per_visitor=SHARE_MAX_RUNS_PER_VISITOR,
            model_choices=tuple(str(Path(p).expanduser().resolve()) for p in model_choices),
            auth=auth_pairs,
            max_n_ctx=SHARE_MAX_N_CTX,
            max_threads=SHARE_MAX_THREADS,
            max_input_chars=max(1, max_input_chars),
            max_upload_bytes=max(1, int(max_upload_mb * 1024 * 1024)),
            memory_budget_bytes=share_memory_budget(),
            remote_choices=tuple(remote_choices),
            max_code_seconds=max_code_seconds,
            max_code_memory_mb=int(max_code_memory_mb),
        )

    @property
    def budget_caps(self) -> Budget:
        return Budget(self.max_lm_calls, self.max_tokens, self.max_seconds, self.max_child_runs)

    def cap_budget(self, budget: Budget | None) -> Budget:
        """The requested budget, lowered to the server caps (an unlimited request gets the cap)."""
        budget = budget or Budget()
        return Budget(
            max_lm_calls=_min_opt(budget.max_lm_calls, self.max_lm_calls),
            max_tokens=_min_opt(budget.max_tokens, self.max_tokens),
            max_seconds=_min_opt(budget.max_seconds, self.max_seconds),
            max_child_runs=_min_opt(budget.max_child_runs, self.max_child_runs),
        )

    @property
    def code_limit_caps(self) -> tuple[float, int] | None:
        """(timeout_s, memory_mb) a candidate program may have at most; None off share mode (the owner's own)."""
        if not self.share_mode or self.max_code_seconds is None or self.max_code_memory_mb is None:
            return None
        return float(self.max_code_seconds), int(self.max_code_memory_mb)

    def gradio_auth(self) -> list[tuple[str, str]] | None:
        """The value for Gradio's `launch(auth=...)`."""
        return list(self.auth) or None

    def model_choice_for(self, value: str) -> str | None:
        """The allowed model file that `value` names (its full path or its bare file name), else None."""
        if not value:
            return None
        for choice in self.model_choices:
            if value == choice or (_is_bare_name(value) and Path(choice).name == value):
                return choice
        return None

    def remote_choice_for(self, spec: dict[str, Any]) -> RemoteChoice | None:
        """The owner's remote model a `source: openai` entry means: its `model` is the choice's name (or its model
        with the same base_url); None when it names anything else."""
        model = str(spec.get("model") or "").strip()
        base_url = str(spec.get("base_url") or "").strip().rstrip("/")
        for choice in self.remote_choices:
            if model == choice.name and base_url in ("", choice.base_url):
                return choice
            if model == choice.model and base_url == choice.base_url:
                return choice
        return None

    def describe(self) -> str:
        """One line for the CLI and the UI banner."""
        if not self.share_mode:
            return "local mode: full access"
        python = "allowed" if self.allow_python else "disabled"
        remote = (f" + remote model(s) {', '.join(c.name for c in self.remote_choices)}" if self.remote_choices
                  else "")
        return (f"share mode: workflows by name only, {len(self.model_choices) + 1} model choice(s){remote}, python "
                f"verifier {python}, per-run caps {self.max_lm_calls} LM calls / {self.max_tokens} tokens / "
                f"{self.max_seconds:g} s / {self.max_child_runs} sub-workflow runs, "
                f"{self.max_concurrent_runs} concurrent run(s), "
                f"{self.max_runs_per_visitor} per visitor")


def share_memory_budget() -> int:
    """The model pool's budget in share mode: $METAGEN_POOL_MEMORY when set, else 1/SHARE_MEMORY_FRACTION of the
    RAM (at least 1 GiB), far below the owner's default of half: visitors share one copy of each model."""
    from backends.pool import POOL_MEMORY_ENV, default_memory_budget

    owners = default_memory_budget()  # $METAGEN_POOL_MEMORY, else half the RAM
    if os.environ.get(POOL_MEMORY_ENV, "").strip():
        return owners
    return max(1024**3, owners * 2 // SHARE_MEMORY_FRACTION)


def runs_per_address(policy: SharePolicy) -> int | None:
    """Unfinished runs the sessions of one client address may have together (None: no limit, local mode): a
    session id is free to mint, so without it one client with 5 ids filled the queue. Half the queue (at least a
    visitor's own limit): people behind one NAT still run side by side, and others always find room."""
    if not policy.share_mode or policy.max_runs_per_visitor is None:
        return None
    return max(policy.max_runs_per_visitor, policy.max_queue // 2)


def inputs_problem(values: dict[str, Any], policy: SharePolicy) -> str | None:
    """Why a run's inputs are refused under `policy` (too many characters together), else None."""
    if policy.max_input_chars is None:
        return None
    total = 0
    for value in values.values():
        total += len(value) if isinstance(value, str) else len(repr(value)) if value is not None else 0
        if total > policy.max_input_chars:
            return (f"the run's inputs have more than {policy.max_input_chars:,} characters, the most this shared "
                    "app takes; shorten them")
    return None


def _min_opt(a: int | float | None, b: int | float | None) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def _is_bare_name(value: str) -> bool:
    return "/" not in value and "\\" not in value and value not in {".", ".."}


# ------------------------------------------------------------------ workflow names


# ------------------------------------------------------------------ workflow checks


PYTHON_SELECTOR_KEYS = ("method", "methods", "scorer", "check")
"""Params that choose a scoring method (verifier `method`, search `scorer`, refiner `check`)."""


def _is_python(value: Any) -> bool:
    return isinstance(value, str) and value.strip().lower() == "python"


def _uses_python(value: Any) -> bool:
    """Whether params ask for the python verifier, also inside nested settings and method lists."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in PYTHON_SELECTOR_KEYS and (_is_python(item) or (
                    isinstance(item, list | tuple) and any(_is_python(m) for m in item))):
                return True
            if _uses_python(item):
                return True
        return False
    if isinstance(value, list | tuple):
        return any(_uses_python(v) for v in value)
    return False


CODE_EXECUTION_METHODS = ("tests", "behaviour")
"""Methods that run candidates' code: refused in share mode unless the owner passes --allow-code-execution."""


def _runs_candidate_code(value: Any) -> bool:
    """Whether params choose a method that runs candidates' code, also inside nested settings and lists."""
    if isinstance(value, dict):
        for key, item in value.items():
            methods = item if isinstance(item, list | tuple) else [item]
            if key in PYTHON_SELECTOR_KEYS and any(isinstance(m, str) and m.strip().lower() in CODE_EXECUTION_METHODS
                                                   for m in methods):
                return True
            if _runs_candidate_code(item):
                return True
        return False
    if isinstance(value, list | tuple):
        return any(_runs_candidate_code(v) for v in value)
    return False


def _code_strings(value: Any) -> list[str]:
    """Every `code` param inside params (nested settings included)."""
    if isinstance(value, dict):
        found = [str(v) for k, v in value.items() if k == "code" and isinstance(v, str) and v.strip()]
        return found + [c for k, v in value.items() if k != "code" for c in _code_strings(v)]
    if isinstance(value, list | tuple):
        return [c for v in value for c in _code_strings(v)]
    return []


def python_code(wf: Workflow) -> list[dict[str, str]]:
    """The python verifier code a workflow would run, one {node_id, code} per node that uses python
    (empty when it runs none); what the user is shown before a workflow from a link or upload runs."""
    found: list[dict[str, str]] = []
    for node in wf.nodes:
        if node.kind == "python" or _uses_python(node.params):
            codes = _code_strings(node.params) or ["(no code given)"]
            found.extend({"node_id": node.id, "code": code} for code in codes)
    return found


def _urls_text(base_url: Any) -> str:
    """A `base_url` as a person reads it: the URL, or the servers of a list joined by commas."""
    if isinstance(base_url, list):
        return ", ".join(str(e.get("url") if isinstance(e, dict) else e) for e in base_url)
    return str(base_url or "")


def remote_models(wf: Workflow) -> list[dict[str, str]]:
    """The remote servers a workflow sends prompts to, one {alias, base_url, model, api_key_env} per
    `source: openai` entry; what the user is shown before a workflow from a link or upload runs."""
    return [{"alias": str(alias), "base_url": _urls_text(spec.get("base_url")), "model": str(spec.get("model") or ""),
             "api_key_env": str(spec.get("api_key_env") or "")}
            for alias, spec in wf.models.items() if isinstance(spec, dict) and spec.get("source") == "openai"]


def check_workflow_allowed(wf: Workflow, policy: SharePolicy) -> list[Issue]:
    """Problems that make this workflow unrunnable under `policy` (empty when it may run)."""
    issues = _python_issues(wf, policy) + _code_execution_issues(wf, policy)
    if not policy.share_mode:
        return issues
    return issues + _search_cap_issues(wf) + _prm_cap_issues(wf) + _model_issues(wf, policy)


def _python_issues(wf: Workflow, policy: SharePolicy) -> list[Issue]:
    """Each node that would run the python verifier, unless the owner allowed python."""
    if policy.allow_python:
        return []
    return [Issue("python_disabled", "the python verifier is disabled on this shared app",
                  "use another verifier method (regex, exact, llm_judge...), or, as the owner, "
                  "start the app with --allow-python",
                  node_id=node.id, line=wf.node_line(node.id, "params"))
            for node in wf.nodes if node.kind == "python" or _uses_python(node.params)]


def _code_execution_issues(wf: Workflow, policy: SharePolicy) -> list[Issue]:
    """Each node that would run candidates' code, unless the owner allowed code execution."""
    if policy.allow_code_execution:
        return []
    return [Issue("code_execution_disabled",
                  "running candidates' code (method: tests / behaviour) is disabled on this shared app",
                  "use another verifier method, or, as the owner, start the app with --allow-code-execution",
                  node_id=node.id, line=wf.node_line(node.id, "params"))
            for node in wf.nodes if _runs_candidate_code(node.params)]


def _model_issues(wf: Workflow, policy: SharePolicy) -> list[Issue]:
    """Each `models` entry a shared app refuses: a remote server it does not offer, a Hub download, a file
    outside its list, settings it does not accept or above its limits."""
    issues: list[Issue] = []
    choices = ", ".join(Path(c).name for c in policy.model_choices) or "none besides the bundled model"
    for alias, spec in wf.models.items():
        if not isinstance(spec, dict):
            continue
        if spec.get("source") == "openai":  # the app's server would call any URL a visitor names (SSRF)
            issues += _remote_entry_issues(wf, alias, spec, policy, choices)
        elif spec.get("source") == "hub":  # a shared app never downloads a model a visitor names
            issues.append(Issue("model_path_refused", f"model {alias!r} asks for a Hub model, which a shared app "
                                "never pulls", f"pick a model from the list ({choices}) or use `source: bundled`",
                                line=wf.line_of("models", alias, "source") or wf.line_of("models", alias)))
        else:
            issues += _local_model_issues(wf, alias, spec, policy, choices)
    return issues


def _local_model_issues(wf: Workflow, alias: str, spec: dict[str, Any], policy: SharePolicy,
                        choices: str) -> list[Issue]:
    """A local model entry: only the owner's files, only the accepted settings, within the owner's limits."""
    issues: list[Issue] = []
    line = wf.line_of("models", alias)
    extra = sorted(str(key) for key in set(spec) - _SHARE_MODEL_KEYS)  # YAML keys may be 1, true, null
    if extra:
        issues.append(Issue("model_option_refused",
                            f"model {alias!r} sets {', '.join(extra)}, which a shared app does not accept",
                            "remove those settings", line=line))
    source = spec.get("source", "path" if spec.get("path") else "bundled")
    if source == "path" or spec.get("path"):
        value = str(spec.get("path") or "")
        if policy.model_choice_for(value) is None:
            issues.append(Issue("model_path_refused",
                                f"model {alias!r} points at {value!r}, which is not one of this app's models",
                                f"pick a model from the list ({choices}) or use `source: bundled`",
                                line=wf.line_of("models", alias, "path") or line))
    return issues + _model_limit_issues(wf, alias, spec, policy)


def _model_limit_issues(wf: Workflow, alias: str, spec: dict[str, Any], policy: SharePolicy) -> list[Issue]:
    """A local model's n_ctx and threads above the owner's limits."""
    issues: list[Issue] = []
    line = wf.line_of("models", alias)
    n_ctx = model_int(spec, "n_ctx")
    if policy.max_n_ctx is not None and n_ctx is not None and n_ctx > policy.max_n_ctx:
        issues.append(Issue("model_option_refused",
                            f"model {alias!r} asks for n_ctx={n_ctx}; this shared app allows at most "
                            f"{policy.max_n_ctx}", f"set n_ctx to {policy.max_n_ctx} or less",
                            line=wf.line_of("models", alias, "n_ctx") or line))
    threads = model_int(spec, "threads")
    if policy.max_threads is not None and threads is not None and threads > policy.max_threads:
        issues.append(Issue("model_option_refused",
                            f"model {alias!r} asks for {threads} threads; this shared app allows at most "
                            f"{policy.max_threads}", "lower `threads` or remove it",
                            line=wf.line_of("models", alias, "threads") or line))
    return issues


def _remote_entry_issues(wf: Workflow, alias: str, spec: dict[str, Any], policy: SharePolicy,
                         choices: str) -> list[Issue]:
    """A visitor's `source: openai` entry: allowed only as one of the owner's `--remote-model`s, by name."""
    line = wf.line_of("models", alias)
    choice = policy.remote_choice_for(spec)
    if choice is None:
        offered = ", ".join(c.name for c in policy.remote_choices)
        hint = (f"write `model: NAME` with one of this app's remote models ({offered}), or use `source: bundled`"
                if offered else f"use `source: bundled` or a model from the list ({choices})")
        return [Issue("model_source_refused", f"model {alias!r} runs on another server ({spec.get('base_url')}); "
                      "this shared app runs only its own models" + (" and the remote models its owner offers"
                                                                    if offered else ""), hint,
                      line=wf.line_of("models", alias, "source") or line)]
    extra = sorted(str(key) for key in set(spec) - _REMOTE_VISITOR_KEYS)
    key_env = spec.get("api_key_env")
    if key_env not in (None, choice.api_key_env):
        extra.append("api_key_env")  # only the owner says which of this machine's variables holds a key
    if extra:
        return [Issue("model_option_refused", f"model {alias!r} sets {', '.join(extra)}, which a shared app does not "
                      f"accept on its remote model {choice.name!r}", "remove those settings", line=line)]
    return []


def child_run_issues(wf: Workflow, checked: Checked, policy: SharePolicy) -> list[Issue]:
    """A problem when the sub-workflow runs a run of `wf` would start, counted before it runs, pass the cap."""
    if policy.max_child_runs is None or not checked.children:
        return []
    count = child_runs(wf, checked)
    if count <= policy.max_child_runs:
        return []
    return [Issue("too_many_child_runs", f"a run of this workflow would start at least {count:,} sub-workflow runs; "
                  f"this shared app allows {policy.max_child_runs:,} per run",
                  "map over fewer candidates, nest fewer mapped levels, or run it on your own machine")]


def tree_refusals(wf: Workflow, checked: Checked, policy: SharePolicy) -> list[Issue]:
    """What `policy` refuses in `wf` and in every sub-workflow of its checked tree (python verifiers, candidates'
    code, models, caps, sub-workflow runs): the one check a run and a save both get."""
    issues = check_workflow_allowed(wf, policy)
    if policy.share_mode:
        issues += child_run_issues(wf, checked, policy)
    for path, child in descendants(checked):
        issues += prefixed(check_workflow_allowed(child.workflow, policy), path, child.label)
    return issues


SEARCH_CAPS = (("particles", "particles", SHARE_MAX_PARTICLES), ("mcts", "simulations", SHARE_MAX_SIMULATIONS),
               ("ab_mcts", "max_expansions", SHARE_MAX_AB_EXPANSIONS))
"""(strategy, param, share-mode cap) of the search strategies whose cost grows with one param."""


def _search_cap_issues(wf: Workflow) -> list[Issue]:
    """Search nodes whose particles, simulations or AB-MCTS steps exceed the share caps (a visitor's run must stay
    small)."""
    issues: list[Issue] = []
    for node in wf.nodes:
        if node.kind == "sampler" and isinstance(node.params, dict) and node.params.get("method") == "beam":
            n = node.params.get("n", 8)
            if isinstance(n, int) and n > SHARE_MAX_BEAMS:
                issues.append(Issue("share_cap_exceeded", f"beam n={n} is more than this shared app allows "
                                    f"({SHARE_MAX_BEAMS})", f"set n to {SHARE_MAX_BEAMS} or less, or run it on your "
                                    "own machine", node_id=node.id, line=wf.node_line(node.id, "params", "n")))
        if node.kind != "search" or not isinstance(node.params, dict):
            continue
        for strategy, param, cap in SEARCH_CAPS:
            value = node.params.get(param)
            if node.params.get("strategy") == strategy and isinstance(value, int) and not isinstance(value, bool) \
                    and value > cap:
                issues.append(Issue("share_cap_exceeded", f"{param}={value} is more than this shared app allows "
                                    f"({cap})", f"set {param} to {cap} or less, or run it on your own machine",
                                    node_id=node.id, line=wf.node_line(node.id, "params", param)))
    return issues


def _prm_cap_issues(wf: Workflow) -> list[Issue]:
    """Nodes whose PRM scores more steps per candidate than the share cap allows."""
    issues: list[Issue] = []
    for node in wf.nodes:
        value = node.params.get("max_steps") if isinstance(node.params, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value > SHARE_MAX_PRM_STEPS:
            issues.append(Issue("share_cap_exceeded", f"max_steps={value} is more than this shared app allows "
                                f"({SHARE_MAX_PRM_STEPS})", f"set max_steps to {SHARE_MAX_PRM_STEPS} or less",
                                node_id=node.id, line=wf.node_line(node.id, "params", "max_steps")))
    return issues


OWNER_MODEL_SETTINGS = ("device", "n_ctx", "threads", "n_gpu_layers", "flash_attn")
"""Settings that decide which copy of a model is loaded; in share mode the owner's settings replace a
visitor's, so that visitors share one loaded copy per model file and cannot make the app load another."""


def resolve_model_choices(wf: Workflow, policy: SharePolicy) -> Workflow:
    """A copy of `wf` whose model paths given as bare file names are replaced by the allowed full path, and
    whose `OWNER_MODEL_SETTINGS` are dropped in share mode, so the owner's defaults (and remembered device
    settings) apply (call after `check_workflow_allowed` found no problem)."""
    if not policy.share_mode or not wf.models:
        return wf
    models = {}
    for alias, spec in wf.models.items():
        choice = policy.remote_choice_for(spec) if spec.get("source") == "openai" else None
        if choice is not None:  # the owner's address, model and key variable, whatever the visitor wrote
            models[alias] = choice.spec()
            continue
        spec = {k: v for k, v in spec.items() if k not in OWNER_MODEL_SETTINGS}
        if spec.get("path"):
            choice = policy.model_choice_for(str(spec["path"]))
            if choice is not None:
                spec["path"] = choice
        dropped = sorted(set(wf.models[alias]) & set(OWNER_MODEL_SETTINGS))
        if dropped:
            log.info("share mode: model %r runs with the owner's %s", alias, ", ".join(dropped))
        models[alias] = spec
    return replace(wf, models=models, lines=wf.lines, load_issues=wf.load_issues)


# ------------------------------------------------------------------ concurrent runs


