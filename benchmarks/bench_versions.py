"""Workflow versions (issue 50): what versioning costs a save, and how fast `metagen history` answers.

1. save: a parsed workflow saved --saves times, each save a new version (a param changed), by a plain canonical
   atomic write (temp file + fsync + rename, as the editor and `Workflow.save` did) and by
   `WorkflowVersions.save_workflow` (the same write, then the version's transaction), interleaved in one process;
   then identical saves (no new version) and saves of YAML text. Printed: the median ms of each, the difference
   (target <= 10 ms) and the ratio.
2. history: a workflow with --versions versions (1,000) and a run per version, `metagen history NAME --json` in
   a fresh process, wall time (target < 1 s), beside the same call in this process and the interpreter's bare
   start-up for scale.
3. replay: see the section at the end (the replay helper's figure, `--only replay`).
Run: .venv/bin/python benchmarks/bench_versions.py [--only save|history] [--saves 200] [--versions 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.platform.fileio import atomic_write_text  # noqa: E402
from app.service.versions import WorkflowVersions, store_at  # noqa: E402
from app.traces.db import create_trace_engine  # noqa: E402
from app.traces.tables import RUNS  # noqa: E402
from app.workflow.spec import load_workflow_text  # noqa: E402

EXAMPLE = (ROOT / "workflows" / "self_consistency.yaml").read_text(encoding="utf-8")


def _variant(i: int) -> str:
    return EXAMPLE.replace("max_tokens: 64", f"max_tokens: {64 + i}")


def _ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def bench_save(saves: int) -> dict[str, Any]:
    """The editor's and the Python API's save of a workflow already parsed: a plain canonical atomic write (what
    `save_workflow_atomic` does) against `WorkflowVersions.save_workflow` (the same write, then the version's
    transaction), interleaved, each save a new version; then identical saves, and saves of YAML text (an upload,
    `restore`: the text parsed once more)."""
    with tempfile.TemporaryDirectory(prefix="metagen-bench-versions-") as tmp:
        folder = Path(tmp) / "wf"
        folder.mkdir()
        versions = WorkflowVersions(store_at(Path(tmp) / "t.db"), folder)
        versions.save_text("warm", EXAMPLE)  # the tables and the first connection
        workflows = [load_workflow_text(_variant(i)) for i in range(saves)]
        plain, versioned, same, text_saves = [], [], [], []
        for wf in workflows:
            start = time.perf_counter()
            atomic_write_text(folder / "plain.yaml", wf.to_yaml())
            plain.append(time.perf_counter() - start)
            start = time.perf_counter()
            versions.save_workflow("sc", wf)
            versioned.append(time.perf_counter() - start)
        for _ in range(saves):
            start = time.perf_counter()
            versions.save_workflow("sc", workflows[-1])
            same.append(time.perf_counter() - start)
        for i in range(saves):
            start = time.perf_counter()
            versions.save_text("text", _variant(i))
            text_saves.append(time.perf_counter() - start)
        assert len(versions.store.versions("sc")) == saves
    return {"saves": saves, "plain_ms": _ms(plain), "versioned_ms": _ms(versioned), "identical_ms": _ms(same),
            "text_ms": _ms(text_saves), "over_ms": _ms(versioned) - _ms(plain), "ratio": _ms(versioned) / _ms(plain)}


def _seed_history(db: Path, folder: Path, count: int) -> str:
    """`count` versions of one workflow (one transaction each, as saves make them) and a run per version."""
    versions = WorkflowVersions(store_at(db), folder)
    hashes = [versions.save_text("sc", _variant(i), message=f"save {i}").version for i in range(count)]
    engine = create_trace_engine(db)
    with engine.begin() as conn:
        conn.execute(RUNS.insert(), [{"id": f"run{i}", "workflow": "self-consistency", "workflow_hash": h}
                                     for i, h in enumerate(hashes)])
    engine.dispose()
    return hashes[-1]


def bench_history(count: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="metagen-bench-versions-") as tmp:
        folder, db = Path(tmp) / "wf", Path(tmp) / "t.db"
        folder.mkdir()
        start = time.perf_counter()
        newest = _seed_history(db, folder, count)
        seeded_s = time.perf_counter() - start
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        command = [sys.executable, "-m", "app.cli", "history", "sc", "--json", "--workflows", str(folder),
                   "--db", str(db)]
        walls = []
        for _ in range(3):
            start = time.perf_counter()
            done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
            walls.append(time.perf_counter() - start)
        listed = json.loads(done.stdout)["versions"]
        assert len(listed) == count and listed[0]["version"] == newest and listed[0]["runs"] == 1
        versions = WorkflowVersions(store_at(db), folder)
        start = time.perf_counter()
        rows = versions.history("sc")
        in_process_s = time.perf_counter() - start
        assert len(rows) == count
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        bare_s = time.perf_counter() - start
    return {"versions": count, "cli_s": statistics.median(walls), "in_process_s": in_process_s,
            "python_start_s": bare_s, "seeded_s": seeded_s, "seeded_ms_per_save": seeded_s / count * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--only", choices=["save", "history", "replay"], default=None)
    parser.add_argument("--saves", type=int, default=200)
    parser.add_argument("--versions", type=int, default=1000)
    args = parser.parse_args()
    if args.only in (None, "save"):
        s = bench_save(args.saves)
        print(f"save ({s['saves']} saves, each a new version; median):  plain {s['plain_ms']:.2f} ms  "
              f"versioned {s['versioned_ms']:.2f} ms  identical (no new version) {s['identical_ms']:.2f} ms")
        print(f"  versioning costs {s['over_ms']:+.2f} ms a save (target <= 10 ms), {s['ratio']:.2f}x a plain save "
              f"[{'ok' if s['over_ms'] <= 10 else 'OVER'}]; a save of YAML text (parsed again) {s['text_ms']:.2f} ms")
    if args.only in (None, "history"):
        h = bench_history(args.versions)
        print(f"history ({h['versions']} versions, a run each): `metagen history --json` {h['cli_s']:.2f} s in a "
              f"fresh process (target < 1 s) [{'ok' if h['cli_s'] < 1 else 'OVER'}]; the same call in process "
              f"{h['in_process_s'] * 1000:.1f} ms; a bare python start {h['python_start_s']:.2f} s "
              f"(cli / bare start {h['cli_s'] / h['python_start_s']:.1f}x)")
        print(f"  ({h['versions']} saves recorded in {h['seeded_s']:.1f} s, {h['seeded_ms_per_save']:.2f} ms each)")
    if args.only in (None, "replay"):
        bench_replay()


# ---------------------------------------------------------------------- replay (§6: the replay helper's figure)


def bench_replay() -> None:
    """A replay of a 64-call run against the original run's time (target <= 5 %): added with `metagen replay`."""
    print("replay: not measured in this branch (bench_replay is filled in with `metagen replay`)")


if __name__ == "__main__":
    main()
