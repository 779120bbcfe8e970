"""Model specs of a workflow (`models:` section): the one schema of a model entry, its checks, and specs."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.workflow.model_refs import (
    HUB_FIELDS,
    ModelNotPulledError,
    hub_entry_problems,
    resolve_hub_entry,
    resolve_model_path,
)
from app.workflow.problems import Issue, WorkflowError
from app.workflow.spec import Workflow
from app.workflow.speculative_spec import EXAMPLE as SPECULATIVE_EXAMPLE
from app.workflow.speculative_spec import check_speculative, speculative_from_dict
from backends.base import ModelSpec
from backends.llama.models.cpu_weights import CPU_WEIGHTS

DEFAULT_MODEL_ALIAS = "main"
MODEL_SOURCES = ("bundled", "path", "openai", "hub", "fake")
DEVICES = ("auto", "cpu", "gpu", "metal")


@dataclass(frozen=True)
class ModelField:
    """One key of a `models:` entry: its type, and its allowed values or range."""

    type: type
    choices: tuple[str, ...] = ()
    low: int | None = None
    high: int | None = None
    example: str = ""
    nullable: bool = False
    """True when `null` means "not set" (the backend's default)."""


MODEL_FIELDS: dict[str, ModelField] = {
    "source": ModelField(str, choices=MODEL_SOURCES, example="source: bundled"),
    "path": ModelField(str, example="path: /path/to/model.gguf", nullable=True),
    "device": ModelField(str, choices=DEVICES, example="device: auto"),
    "n_ctx": ModelField(int, low=128, high=131072, example="n_ctx: 4096"),
    "threads": ModelField(int, low=1, high=256, example="threads: 4", nullable=True),
    "n_gpu_layers": ModelField(int, low=-1, high=1000, example="n_gpu_layers: -1", nullable=True),
    "flash_attn": ModelField(bool, example="flash_attn: true"),
    "cpu_weights": ModelField(str, choices=CPU_WEIGHTS, example="cpu_weights: auto", nullable=True),
    "options": ModelField(dict, example="options: {seed: 1}", nullable=True),
    "base_url": ModelField(str, example="base_url: http://127.0.0.1:8000/v1"),
    "model": ModelField(str, example="model: Qwen/Qwen2.5-7B-Instruct"),
    "api_key_env": ModelField(str, example="api_key_env: OPENAI_API_KEY", nullable=True),
    "max_concurrency": ModelField(int, low=1, high=256, example="max_concurrency: 8", nullable=True),
    "timeout_s": ModelField(int, low=1, high=3600, example="timeout_s: 300", nullable=True),
    "context_length": ModelField(int, low=128, high=10_000_000, example="context_length: 32768", nullable=True),
    "api": ModelField(str, choices=("chat", "rerank", "pooling"), example="api: rerank", nullable=True),
    "pooling": ModelField(str, choices=("none", "rank"), example="pooling: rank", nullable=True),
    "speculative": ModelField(dict, example=SPECULATIVE_EXAMPLE, nullable=True),
    "repo": ModelField(str, example="repo: unsloth/Qwen3-0.6B-GGUF"),
    "quant": ModelField(str, example="quant: Q4_K_M", nullable=True),
    "file": ModelField(str, example="file: Qwen3-0.6B-Q4_K_M.gguf", nullable=True),
}
"""The schema of a `models:` entry; validation, the share caps and `model_spec_from_dict` all read it."""

_TYPE_WORDS = {str: "text", int: "a whole number", bool: "true or false", dict: "a mapping"}
REMOTE_FIELDS = ("base_url", "model", "api_key_env", "max_concurrency", "timeout_s", "context_length", "api")
"""Keys that only a `source: openai` entry (a remote OpenAI-compatible server) takes."""
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_URL = re.compile(r"https?://[^\s/?#]+(/[^\s?#]*)?")


def _suggest(word: str, options: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(word, list(options), n=1)
    return f"did you mean {close[0]!r}?" if close else f"choose one of: {', '.join(options)}"


def _has_type(value: Any, wanted: type) -> bool:
    if wanted is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, wanted)


def model_field_problem(key: str, value: Any) -> tuple[str, str] | None:
    """(problem, hint) when `value` does not fit the schema of `key`, else None (unknown keys: None)."""
    field = MODEL_FIELDS.get(key)
    if field is None or (value is None and field.nullable):
        return None
    if key == "base_url" and isinstance(value, list):
        return None  # several servers of one model: checked entry by entry in _replica_issues
    if not _has_type(value, field.type):
        quoted = " (remove the quotes)" if isinstance(value, str) and field.type in (int, bool) else ""
        return (f"{key} must be {_TYPE_WORDS[field.type]}, got {type(value).__name__} {value!r}",
                f"write `{field.example}`{quoted}")
    if field.choices and value not in field.choices:
        return f"{key} {value!r} is not one of {', '.join(field.choices)}", _suggest(str(value), field.choices)
    if field.low is not None and field.high is not None and not field.low <= value <= field.high:
        return (f"{key} must be between {field.low} and {field.high}, got {value}",
                f"write `{field.example}`")
    return None


def check_model_entry(alias: str, spec: dict[str, Any],
                      line_of: Callable[..., int | None]) -> list[Issue]:
    """Every problem of one `models:` entry against `MODEL_FIELDS` (code `bad_model`, with line and hint)."""
    issues: list[Issue] = []
    for key, value in spec.items():
        problem = model_field_problem(str(key), value)
        if problem is not None:
            issues.append(Issue("bad_model", f"model {alias!r}: {problem[0]}", problem[1],
                                line=line_of("models", alias, str(key))))
    source = spec.get("source", "path" if "path" in spec else "bundled")
    if source == "path" and not spec.get("path"):
        issues.append(Issue("bad_model", f"model {alias!r} has source 'path' but no path",
                            "add `path: /path/to/model.gguf`", line=line_of("models", alias)))
    issues += _remote_issues(alias, spec, source, line_of)
    issues += _hub_issues(alias, spec, source, line_of)
    return issues


def _hub_issues(alias: str, spec: dict[str, Any], source: Any, line_of: Callable[..., int | None]) -> list[Issue]:
    """A `source: hub` entry names a repo (and a quant or file); its keys on any other source are a mistake."""
    if source != "hub":
        misplaced = [k for k in HUB_FIELDS if k in spec]
        if not misplaced:
            return []
        return [Issue("bad_model", f"model {alias!r} sets {', '.join(misplaced)}, which only a Hub model takes",
                      "add `source: hub` (pulled on first use), or remove those keys",
                      line=line_of("models", alias, misplaced[0]) or line_of("models", alias))]
    return [Issue("bad_model", f"model {alias!r} {problem}", hint,
                  line=line_of("models", alias, key) or line_of("models", alias))
            for key, problem, hint in hub_entry_problems(spec)]


def _remote_issues(alias: str, spec: dict[str, Any], source: Any,
                   line_of: Callable[..., int | None]) -> list[Issue]:
    """The checks of a `source: openai` entry: a base URL, a model, a key only by environment variable."""
    def issue(message: str, hint: str, *key: str) -> Issue:
        return Issue("bad_model", f"model {alias!r} {message}", hint,
                     line=line_of("models", alias, *key) or line_of("models", alias))

    issues = []
    if "api_key" in spec:
        issues.append(issue("writes an API key into the workflow, where runs, traces and shared files would "
                            "carry it", "remove `api_key:`, put the key in an environment variable and write "
                            "`api_key_env: NAME_OF_THAT_VARIABLE`", "api_key"))
    if source != "openai":
        remote = [k for k in REMOTE_FIELDS if k in spec]
        if remote:
            issues.append(issue(f"sets {', '.join(remote)}, which only a remote server takes",
                                "add `source: openai` for a remote server, or remove those keys", remote[0]))
        return issues
    base_url = spec.get("base_url")
    if isinstance(base_url, list):
        issues += [issue(problem, hint, "base_url") for problem, hint in replica_problems(base_url)]
    elif not base_url:
        issues.append(issue("has source 'openai' but no base_url",
                            "add `base_url: http://HOST:PORT/v1` (the server's OpenAI-compatible API root)"))
    elif isinstance(base_url, str) and not _URL.fullmatch(base_url.strip()):
        issues.append(issue(f"base_url {base_url!r} is not an http:// or https:// URL",
                            "write `base_url: http://HOST:PORT/v1`", "base_url"))
    if not spec.get("model"):
        issues.append(issue("has source 'openai' but no model",
                            "add `model: NAME` (the name the server lists at GET /v1/models; `metagen models "
                            "check URL` prints them)"))
    key_env = spec.get("api_key_env")
    if isinstance(key_env, str) and not _ENV_NAME.fullmatch(key_env):
        issues.append(issue(f"api_key_env {key_env!r} is not an environment variable name",
                            "give the variable's name (letters, digits, _), such as `api_key_env: "
                            "OPENAI_API_KEY`, never the key itself", "api_key_env"))
    if "path" in spec:
        issues.append(issue("has source 'openai' and a path", "remove `path:` (a remote server loads its own "
                            "model)", "path"))
    if spec.get("pooling") == "rank":
        issues.append(issue("sets pooling: rank, which is for a local GGUF", "for a remote reranker or reward model "
                            "write `api: rerank` (/v1/rerank) or `api: pooling` (vLLM /pooling)", "pooling"))
    return issues


REPLICA_KEYS = ("url", "max_concurrency")
_REPLICA_EXAMPLE = "base_url: [http://gpu1:8000/v1, {url: http://gpu2:8000/v1, max_concurrency: 16}]"


def _replica_problem(index: int, entry: Any) -> tuple[str, str] | None:
    """(problem, hint) of entry `index` of a base_url list (a URL, or {url, max_concurrency}), else None."""
    where = f"base_url[{index}]"
    if isinstance(entry, dict):
        if "model" in entry:
            return (f"{where} sets its own model {entry['model']!r}; every server of one entry serves the same "
                    "model", "give `model:` once on the entry; a server with another model is another entry")
        unknown = [str(k) for k in entry if k not in REPLICA_KEYS]
        if unknown:
            hint = _suggest(unknown[0], REPLICA_KEYS)
            return f"{where} has unknown key {unknown[0]!r}", f"a server is {{url, max_concurrency}}: {hint}"
        problem = model_field_problem("max_concurrency", entry.get("max_concurrency"))
        if problem is not None:
            return f"{where}: {problem[0]}", problem[1]
        entry = entry.get("url")
    if not isinstance(entry, str) or not _URL.fullmatch(entry.strip()):
        return (f"{where} {entry!r} is not an http:// or https:// URL",
                f"write each server as a URL or {{url: URL, max_concurrency: N}}: `{_REPLICA_EXAMPLE}`")
    return None


def replica_problems(urls: list[Any]) -> list[tuple[str, str]]:
    """Every problem of a `base_url` list (several servers of one model), as (problem, hint)."""
    if not urls:
        return [("has an empty base_url list", f"name at least one server: `{_REPLICA_EXAMPLE}`")]
    problems = [p for i, entry in enumerate(urls) if (p := _replica_problem(i, entry)) is not None]
    seen = [str(e.get("url") if isinstance(e, dict) else e).strip().rstrip("/") for e in urls]
    twice = sorted({u for u in seen if seen.count(u) > 1})
    if twice:
        problems.append((f"names {twice[0]} twice in base_url", "list each server once; raise its "
                         "max_concurrency instead"))
    return problems


def replica_servers(value: Any) -> tuple[tuple[str, int | None], ...]:
    """(url, max_concurrency or None) of each server of a checked `base_url` list; () for one URL."""
    if not isinstance(value, list):
        return ()
    return tuple((str(e["url"]).strip().rstrip("/"), e.get("max_concurrency")) if isinstance(e, dict)
                 else (str(e).strip().rstrip("/"), None) for e in value)


def model_int(spec: dict[str, Any], key: str) -> int | None:
    """The integer setting `key` of a model entry: an int, or a string of digits (as a cap must see it)."""
    value = spec.get(key)
    if _has_type(value, int):
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def _models_folder() -> Any:
    from app.platform.paths import models_dir

    return models_dir()


def local_entry(data: dict[str, Any], alias: str = DEFAULT_MODEL_ALIAS) -> dict[str, Any]:
    """The entry with its portable references made local: a bare `path:` file name is the models folder's file,
    a `source: hub` model its pulled file (model_refs.ModelNotPulledError when it is not there yet)."""
    if data.get("source") == "hub":
        return resolve_hub_entry(alias, data, _models_folder())
    if isinstance(data.get("path"), str) and data.get("source", "path") == "path":
        return {**data, "path": resolve_model_path(data["path"], _models_folder())}
    return data


def model_spec_from_dict(data: dict[str, Any], models: dict[str, Any] | None = None,
                         alias: str = DEFAULT_MODEL_ALIAS) -> ModelSpec:
    """The spec of one entry; raises ValueError on a field that does not fit `MODEL_FIELDS` (or a `speculative:`
    option that does not check out; its draft alias is resolved in `models`); model_refs.ModelNotPulledError (a
    ValueError) for a Hub model not pulled yet."""
    data = local_entry(data, alias)
    for key, value in data.items():
        problem = model_field_problem(str(key), value)
        if problem is not None:
            raise ValueError(f"{problem[0]}; {problem[1]}")
    models = models if models is not None else {alias: data}
    speculative = [i for i in check_speculative(alias, data, models, lambda *_: None) if i.severity == "error"]
    if speculative:
        raise ValueError(f"{speculative[0].message}; {speculative[0].hint}")
    source = data.get("source", "path" if data.get("path") else "bundled")
    options = data.get("options") or {}
    if isinstance(data.get("base_url"), list) and (problems := replica_problems(data["base_url"])):
        raise ValueError(f"{problems[0][0]}; {problems[0][1]}")
    replicas = replica_servers(data.get("base_url"))
    return ModelSpec(
        source=source,
        path=data["path"] if data.get("path") else None,
        device=data.get("device", "auto"),
        n_ctx=data.get("n_ctx", 4096),
        threads=data.get("threads"),
        n_gpu_layers=data.get("n_gpu_layers"),
        flash_attn=data.get("flash_attn", False),
        cpu_weights=data.get("cpu_weights"),
        options=tuple(sorted((str(k), v) for k, v in options.items())),
        **{key: data.get(key) for key in REMOTE_FIELDS if key != "base_url"},
        base_url=replicas[0][0] if replicas else data.get("base_url"),
        replicas=replicas,
        pooling=data.get("pooling") if data.get("pooling") != "none" else None,
        speculative=speculative_from_dict(data.get("speculative"), models, model_spec_from_dict),
    )


def model_specs(wf: Workflow) -> dict[str, ModelSpec]:
    """Alias -> spec; a workflow without `models:` runs on the bundled model as 'main'. WorkflowError with code
    `model_not_pulled` when a Hub model is not in the models folder yet."""
    if not wf.models:
        return {DEFAULT_MODEL_ALIAS: ModelSpec()}
    try:
        return {alias: model_spec_from_dict(spec, wf.models, alias) for alias, spec in wf.models.items()}
    except ModelNotPulledError as exc:
        raise WorkflowError([Issue("model_not_pulled", str(exc), f"`{exc.need.pull_command()}`, or run with --pull",
                                   line=wf.line_of("models", exc.need.alias))]) from None
