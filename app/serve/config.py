"""How the /v1 routes serve: API keys, the share-mode rules for requests from other machines, the run queue."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from app.serve.key_runs import KeyRuns
from app.serve.origin_guard import OriginRules
from app.service.studio import StudioService
from app.share.policy import SharePolicy, is_loopback_host
from app.share.run_gate import RunGate

API_KEY_ENV = "METAGEN_API_KEY"
MAX_BODY_BYTES = 1_000_000
MAX_N = 16
DEFAULT_MAX_CONCURRENT_RUNS = 16
DEFAULT_MAX_QUEUE = 64

HOW_TO_SET_A_KEY = (f"set one with --api-key KEY, --api-key-file FILE or ${API_KEY_ENV}; clients send it as "
                    "`Authorization: Bearer KEY` (the openai SDK's api_key)")


@dataclass(frozen=True)
class ServeConfig:
    """What the routes need besides the StudioService. Requests from this machine follow the service's own
    policy; requests from other machines follow `remote_policy` (share mode: caps, no python verifier unless
    allowed) and must carry a key."""

    remote_policy: SharePolicy
    gate: RunGate
    api_keys: tuple[str, ...] = field(default=(), repr=False)
    """Accepted keys; when set, every request (from this machine too) must carry one."""
    all_remote: bool = False
    """Count every request as coming from another machine (a share tunnel ends on this machine)."""
    share_rules_everywhere: bool = False
    """Apply the share-mode rules to requests from this machine too (--share-mode, for trying them out)."""
    max_body_bytes: int = MAX_BODY_BYTES
    max_n: int = MAX_N
    trace_link: bool = False
    """Whether a Traces tab is served next to the routes (then responses carry a `?run=` link)."""
    auto: str | None = None
    """The model id `model: "auto"` answers with (`metagen serve --auto`); None: the most recent tuned workflow."""
    origins: OriginRules = field(default_factory=OriginRules)
    """The Host names and Origins served (`--allowed-hosts`, `--allowed-origins`; app/serve/origin_guard.py)."""
    responses_retention_days: float = 30.0
    """Stored responses older than this are removed (`--responses-retention DAYS`)."""
    responses_max_bytes: int = 200_000_000
    """Stored-response text one API key may keep; its oldest turns go first (`--responses-max-mb`)."""
    key_runs: KeyRuns = field(default_factory=KeyRuns, compare=False, repr=False)
    """Unfinished runs per API key (share mode's per-visitor limit, per key: `access.gate_for`)."""
    aliases: tuple[tuple[str, str], ...] = ()
    """(name clients send, the model id it answers with): `metagen serve --alias NAME=MODEL`."""


def remote_policy_for(policy: SharePolicy, *, allow_python: bool = False, models_folder: Path | None = None,
                      **caps: float) -> SharePolicy:
    """The share-mode policy for requests from other machines: `policy` itself when it is already in share
    mode (a shared studio), else share mode with these caps."""
    if policy.share_mode:
        return policy
    return SharePolicy.for_serving(force_share_mode=True, allow_python=allow_python, models_folder=models_folder,
                                   **caps)  # type: ignore[arg-type]


def load_api_keys(key: str | None = None, key_file: str | Path | None = None,
                  environ: dict[str, str] | None = None) -> tuple[str, ...]:
    """The API keys from --api-key, --api-key-file (one key per line, # comments) or $METAGEN_API_KEY;
    ValueError saying what to fix."""
    keys: list[str] = []
    if key is not None:
        if not key.strip() or any(c.isspace() for c in key.strip()):
            raise ValueError("--api-key must be a non-empty key without spaces")
        keys.append(key.strip())
    if key_file is not None:
        try:
            text = Path(key_file).expanduser().read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"cannot read the API key file {key_file}: {getattr(exc, 'strerror', None) or exc}") \
                from None
        found = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]
        if not found:
            raise ValueError(f"the API key file {key_file} holds no key (one key per line; # starts a comment)")
        keys += found
    if not keys:
        env = (os.environ if environ is None else environ).get(API_KEY_ENV, "").strip()
        if env:
            keys.append(env)
    return tuple(keys)


def bind_problem(host: str, api_keys: tuple[str, ...]) -> str | None:
    """Why `metagen serve` must not listen on `host` (None when it may)."""
    if is_loopback_host(host) or api_keys:
        return None
    return (f"refusing to listen on {host} without an API key: anyone who can reach this machine could run "
            f"workflows on it. {HOW_TO_SET_A_KEY[0].upper()}{HOW_TO_SET_A_KEY[1:]}")


def studio_config(service: StudioService, *, api_keys: tuple[str, ...] = (), all_remote: bool = False,
                  share_rules_everywhere: bool = False, origins: OriginRules | None = None,
                  aliases: tuple[tuple[str, str], ...] = ()) -> ServeConfig:
    """The routes' settings when they are mounted on the studio's own server: the studio's run queue (API runs
    wait with the editor's), its share policy for requests from other machines, and links to the Traces tab."""
    return ServeConfig(remote_policy=remote_policy_for(service.policy, models_folder=service.models_dir),
                       gate=service.run_gate, api_keys=api_keys, all_remote=all_remote,
                       share_rules_everywhere=share_rules_everywhere, trace_link=True,
                       origins=origins or OriginRules(), aliases=aliases)
