"""Share options of `metagen ui` (--share, --auth(-file), --allow-python, --allow-code-execution, --share-mode) and
the launch that prints both the local and the public URL, explaining a share link that could not be made."""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.share.policy import (
    SHARE_MAX_CODE_MEMORY_MB,
    SHARE_MAX_CODE_SECONDS,
    SHARE_MAX_CONCURRENT_RUNS,
    SHARE_MAX_INPUT_CHARS,
    SHARE_MAX_LM_CALLS,
    SHARE_MAX_SECONDS,
    SHARE_MAX_TOKENS,
    SHARE_MAX_UPLOAD_MB,
    SHARE_MODE_ENV,
    SharePolicy,
    env_share_mode,
    load_auth_file,
    parse_auth,
    parse_remote_model,
)

log = logging.getLogger(__name__)


def add_cap_arguments(group: Any, scope: str = "") -> None:
    """--cap-lm-calls, --cap-tokens, --cap-seconds: the per-run caps of share mode (`metagen ui`, `metagen serve`)."""
    group.add_argument("--cap-lm-calls", type=int, default=SHARE_MAX_LM_CALLS, metavar="N",
                       help=f"{scope}most LM calls per run (default {SHARE_MAX_LM_CALLS})")
    group.add_argument("--cap-tokens", type=int, default=SHARE_MAX_TOKENS, metavar="N",
                       help=f"{scope}most tokens per run (default {SHARE_MAX_TOKENS})")
    group.add_argument("--cap-seconds", type=float, default=SHARE_MAX_SECONDS, metavar="S",
                       help=f"{scope}longest run in seconds (default {SHARE_MAX_SECONDS:g})")


def add_share_arguments(p: argparse.ArgumentParser) -> None:
    """The share flags; `--host` stays with the caller (share mode turns on for a non-loopback host)."""
    g = p.add_argument_group("sharing (share mode turns on with --share or a non-loopback --host)")
    g.add_argument("--share", action="store_true", help="create a public Gradio share link (needs internet)")
    g.add_argument("--auth", action="append", default=[], metavar="USER:PASSWORD",
                   help="ask visitors to log in (repeatable)")
    g.add_argument("--auth-file", default=None, metavar="FILE", help="USER:PASSWORD lines, # comments")
    g.add_argument("--allow-python", action="store_true",
                   help="allow the python verifier in share mode (it runs visitors' code on this machine)")
    g.add_argument("--allow-code-execution", action="store_true",
                   help="allow method: tests / behaviour in share mode (it runs candidates' code, confined, on "
                        "this machine; see docs/security.md)")
    g.add_argument("--cap-code-seconds", type=float, default=SHARE_MAX_CODE_SECONDS, metavar="S",
                   help=f"share mode: most timeout_s of one candidate program (default {SHARE_MAX_CODE_SECONDS:g})")
    g.add_argument("--cap-code-memory-mb", type=int, default=SHARE_MAX_CODE_MEMORY_MB, metavar="MB",
                   help=f"share mode: most memory_mb of one candidate program (default {SHARE_MAX_CODE_MEMORY_MB})")
    add_cap_arguments(g, "share mode: ")
    g.add_argument("--max-concurrent-runs", type=int, default=SHARE_MAX_CONCURRENT_RUNS, metavar="N",
                   help=f"share mode: runs at once; more wait in a queue (default {SHARE_MAX_CONCURRENT_RUNS})")
    g.add_argument("--max-input-chars", type=int, default=SHARE_MAX_INPUT_CHARS, metavar="N",
                   help=f"share mode: characters a run's inputs may have together (default {SHARE_MAX_INPUT_CHARS:,})")
    g.add_argument("--max-upload-mb", type=float, default=SHARE_MAX_UPLOAD_MB, metavar="MB",
                   help=f"share mode: largest file upload in MB (default {SHARE_MAX_UPLOAD_MB})")
    g.add_argument("--remote-model", action="append", default=[], metavar="NAME=URL#MODEL[#KEY_ENV]",
                   help="share mode: offer a remote OpenAI-compatible model to visitors (repeatable); their workflows "
                        "name it by `base_url: URL` and `model: NAME`, any other server is refused; the API key is "
                        "read from the environment variable KEY_ENV")
    g.add_argument("--share-mode", action="store_true",
                   help=f"force share mode on this machine's address too (for trying it out; also ${SHARE_MODE_ENV}=1)")


def policy_from_args(args: argparse.Namespace, host: str) -> SharePolicy:
    """The policy for these flags; ValueError (with what to fix) for bad --auth / --auth-file."""
    pairs: list[tuple[str, str]] = [parse_auth(value) for value in getattr(args, "auth", None) or []]
    if getattr(args, "auth_file", None):
        pairs += load_auth_file(Path(args.auth_file))
    forced = bool(getattr(args, "share_mode", False)) or env_share_mode()
    caps = {"max_lm_calls": getattr(args, "cap_lm_calls", SHARE_MAX_LM_CALLS),
            "max_tokens": getattr(args, "cap_tokens", SHARE_MAX_TOKENS),
            "max_seconds": getattr(args, "cap_seconds", SHARE_MAX_SECONDS),
            "max_concurrent_runs": getattr(args, "max_concurrent_runs", SHARE_MAX_CONCURRENT_RUNS),
            "max_input_chars": getattr(args, "max_input_chars", SHARE_MAX_INPUT_CHARS),
            "max_upload_mb": getattr(args, "max_upload_mb", SHARE_MAX_UPLOAD_MB),
            "max_code_seconds": getattr(args, "cap_code_seconds", SHARE_MAX_CODE_SECONDS),
            "max_code_memory_mb": getattr(args, "cap_code_memory_mb", SHARE_MAX_CODE_MEMORY_MB)}
    for name, value in caps.items():
        if value is None or value <= 0:
            flag = {"max_lm_calls": "--cap-lm-calls", "max_tokens": "--cap-tokens", "max_seconds": "--cap-seconds",
                    "max_concurrent_runs": "--max-concurrent-runs", "max_input_chars": "--max-input-chars",
                    "max_upload_mb": "--max-upload-mb", "max_code_seconds": "--cap-code-seconds",
                    "max_code_memory_mb": "--cap-code-memory-mb"}[name]
            raise ValueError(f"{flag} must be a positive number, got {value}")
    remote = [parse_remote_model(text) for text in getattr(args, "remote_model", None) or []]
    for choice in remote:
        if choice.api_key_env and not os.environ.get(choice.api_key_env):
            log.warning("--remote-model %s: $%s is not set; requests go without an API key", choice.name,
                        choice.api_key_env)
    return SharePolicy.for_serving(host=host, share=bool(getattr(args, "share", False)),
                                   allow_python=bool(getattr(args, "allow_python", False)),
                                   allow_code_execution=bool(getattr(args, "allow_code_execution", False)),
                                   force_share_mode=forced, auth=pairs, remote_choices=remote, **caps)


@dataclass
class Launched:
    local_url: str
    share_url: str | None
    share_problem: str | None
    """Why the public link could not be made (None when not asked for, or made)."""

    def lines(self, policy: SharePolicy) -> list[str]:
        out = [f"Local URL:  {self.local_url}"]
        if self.share_url:
            out.append(f"Public URL: {self.share_url}")
        elif self.share_problem:
            out.append(f"Public URL: none — {self.share_problem}. The app still runs locally, in share mode.")
        out.append(policy.describe())
        if policy.auth:
            out.append(f"Login required ({len(policy.auth)} user(s)).")
        elif policy.share_mode:
            out.append("No login is asked: anyone with the link can use the app (add --auth USER:PASSWORD).")
        return out


def _share_failure(captured: str) -> str:
    for line in captured.splitlines():
        line = line.strip()
        if line.startswith("Could not create share link"):
            first = line.split(". ")[0].rstrip(".")
            return first[0].lower() + first[1:] + " (no internet access, or the Gradio tunnel is blocked)"
    return "the Gradio share tunnel could not be reached (no internet access, or it is blocked)"


def launch_with_share(blocks: Any, *, host: str, port: int, share: bool, **kwargs: Any) -> Launched:
    """`blocks.launch` without blocking; Gradio's long share-failure text is replaced by one clear line."""
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        _app, local_url, share_url = blocks.launch(server_name=host, server_port=port, share=share,
                                                   prevent_thread_lock=True, **kwargs)
    text = captured.getvalue()
    if text.strip():
        log.debug("gradio said: %s", text.strip())
    problem = _share_failure(text) if share and not share_url else None
    return Launched(local_url=str(local_url), share_url=share_url, share_problem=problem)
