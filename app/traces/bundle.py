"""Run bundles: one file holding a run, its workflow (and every sub-workflow it used) and each model call's request
and result, so that `metagen replay` re-runs it without the model (docs/replay.md has the format).

    {"format": "metagen-bundle", "format_version": 1, "exported_at": float,
     "run": {id, workflow, workflow_hash, inputs, seed, budget, models, model_ids, status, error, outputs, stats,
             started_at, wall_s},
     "workflow": {"yaml": str, "hash": str, "subworkflows": {reference: yaml}},
     "models": {model_ref: {"alias", "spec", "model_id"}},
     "cached_nodes": [{node_id, signature, outputs}],
     "calls": [{node, method, model, request, result[, cached]}]}

Written as JSON, or gzip-compressed JSON when the file name ends in `.gz`; read either way (by its first bytes)."""

from __future__ import annotations

import gzip
import json
import time
import zlib
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection

from app.platform.fileio import atomic_write_bytes
from app.run.scheduler import SUBWORKFLOWS_NOTE
from app.run.status import NODE_CACHED
from app.traces.records import load_run
from app.traces.tables import LM_REQUESTS
from app.traces.writer import unpack_entry

BUNDLE_FORMAT = "metagen-bundle"
BUNDLE_VERSION = 1
GZIP_MAGIC = b"\x1f\x8b"
RUN_FIELDS = ("id", "workflow", "workflow_hash", "inputs", "seed", "budget", "models", "model_ids", "status",
              "error", "outputs", "stats", "started_at", "wall_s")


class BundleError(ValueError):
    """A file that is not a usable run bundle, or a run that cannot be bundled; the message says why and what to do."""


def bundle_record(conn: Connection, run_id: str) -> dict[str, Any] | None:
    """The bundle of a run (None if there is no such run); a BundleError if it recorded no model calls' data."""
    record = load_run(conn, run_id, inline_prompts=False)
    if record is None:
        return None
    entries = [unpack_entry(data) for (data,) in conn.execute(
        select(LM_REQUESTS.c.data).where(LM_REQUESTS.c.run_id == run_id).order_by(LM_REQUESTS.c.id))]
    run = record["run"]
    if not entries and record["lm_calls"]:
        raise BundleError(f"run {run_id} was recorded without its model calls' requests (a run from before run "
                          "bundles, or imported from an export that lacked them): run the workflow again and bundle "
                          "that run")
    subworkflows: dict[str, str] = {}
    for event in record["events"]:
        if event.get("node_id") is None and event.get("kind") == SUBWORKFLOWS_NOTE:
            subworkflows.update(event["data"].get("workflows") or {})
    models: dict[str, Any] = {}
    calls = []
    for entry in entries:
        if entry.get("method") == "model":
            models.setdefault(entry["model"], {"alias": entry["request"].get("alias"),
                                               "spec": entry["request"].get("spec"),
                                               "model_id": entry["result"].get("model_id")})
        else:
            calls.append(entry)
    cached = [{"node_id": n["node_id"], "signature": n["signature"], "outputs": n["outputs"]}
              for n in record["nodes"] if n.get("status") == NODE_CACHED and n.get("signature")]
    return {"format": BUNDLE_FORMAT, "format_version": BUNDLE_VERSION, "exported_at": time.time(),
            "run": {k: run.get(k) for k in RUN_FIELDS},
            "workflow": {"yaml": run.get("workflow_yaml") or "", "hash": run.get("workflow_hash") or "",
                         "subworkflows": subworkflows},
            "models": models, "cached_nodes": cached, "calls": calls}


def write_bundle(path: Path, bundle: dict[str, Any]) -> None:
    """Write a bundle atomically: gzip-compressed JSON when the name ends in .gz, else JSON."""
    data = json.dumps(bundle, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
    atomic_write_bytes(path, gzip.compress(data, 6, mtime=0) if path.name.endswith(".gz") else data)


def bundle_bytes(bundle: dict[str, Any]) -> bytes:
    """A bundle as gzip-compressed JSON (what the Traces tab downloads)."""
    return gzip.compress(json.dumps(bundle, ensure_ascii=False, separators=(",", ":"))
                         .encode("utf-8", "surrogatepass"), 6, mtime=0)


def read_bundle(path: Path) -> dict[str, Any]:
    """A bundle file, checked; BundleError naming what is wrong with it otherwise."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise BundleError(f"cannot read {path}: {exc.strerror or exc}") from None
    return parse_bundle(raw, str(path))


def parse_bundle(raw: bytes, name: str = "the bundle") -> dict[str, Any]:
    hint = "make one with `metagen traces export RUN --bundle FILE`"
    if raw.startswith(GZIP_MAGIC):
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise BundleError(f"{name} is a damaged or truncated gzip file ({exc}); {hint}") from None
    try:
        data = json.loads(raw.decode("utf-8", "surrogatepass"))
    except UnicodeDecodeError:
        raise BundleError(f"{name} is neither JSON nor gzip-compressed JSON; {hint}") from None
    except json.JSONDecodeError as exc:
        # cut off: the parser stops at the end, or at a string the end cut open (its error points at its start)
        truncated = exc.pos >= len(raw.rstrip()) - 1 or exc.msg.startswith("Unterminated string")
        raise BundleError(f"{name} is {'truncated' if truncated else 'not valid JSON'} (line {exc.lineno}, column "
                          f"{exc.colno}: {exc.msg}); {hint}") from None
    check_bundle(data, name)
    return data  # type: ignore[no-any-return]


def check_bundle(data: Any, name: str = "the bundle") -> None:
    hint = "make one with `metagen traces export RUN --bundle FILE`"
    if not isinstance(data, dict) or data.get("format") != BUNDLE_FORMAT:
        other = " (a trace export, not a bundle)" if isinstance(data, dict) and data.get("format") == "metagen-trace" \
            else ""
        raise BundleError(f"{name} is not a Metagen run bundle{other}: expected a JSON object with \"format\": "
                          f"\"{BUNDLE_FORMAT}\"; {hint}")
    version = data.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= BUNDLE_VERSION:
        raise BundleError(f"{name} has bundle format_version {version!r}; this Metagen Studio reads version "
                          f"{BUNDLE_VERSION}: " + ("upgrade Metagen Studio to replay it" if isinstance(version, int)
                                                    and not isinstance(version, bool) and version > BUNDLE_VERSION
                                                    else hint))
    shapes = (("run", dict), ("workflow", dict), ("models", dict), ("calls", list))
    for key, kind in shapes:
        if not isinstance(data.get(key), kind):
            raise BundleError(f"{name} is damaged: {key!r} is missing or not a "
                              f"{'list' if kind is list else 'JSON object'}; {hint}")
    if not isinstance(data["workflow"].get("yaml"), str) or not data["workflow"]["yaml"].strip():
        raise BundleError(f"{name} is damaged: it holds no workflow YAML; {hint}")
    for i, call in enumerate(data["calls"]):
        if not (isinstance(call, dict) and isinstance(call.get("method"), str) and isinstance(call.get("model"), str)
                and isinstance(call.get("request"), dict) and "result" in call):
            raise BundleError(f"{name} is damaged: call {i} is not a recorded call "
                              "{node, method, model, request, result}; " + hint)


__all__ = ["BUNDLE_FORMAT", "BUNDLE_VERSION", "BundleError", "bundle_bytes", "bundle_record", "check_bundle",
           "parse_bundle", "read_bundle", "write_bundle"]
