"""The Python API on the real bundled model (llama.cpp): runs, the model kept loaded between them, an evaluation,
and nothing left loaded or running after close."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import plotly.graph_objects as go
import pytest

import metagen

pytestmark = pytest.mark.model
ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = [{"question": "What is 2 + 3?", "answer": "5"}, {"question": "What is 4 + 4?", "answer": "8"}]


def _small(name: str) -> metagen.Workflow:
    return metagen.load(name).with_params({"think.max_tokens": 16})


def test_runs_reuse_the_loaded_model_and_close_unloads_it(tmp_path: Path) -> None:
    before = set(threading.enumerate())
    studio = metagen.Studio(trace_db=tmp_path / "t.db", workflows_dir=tmp_path / "wf", models_dir=tmp_path / "m")
    with studio:
        wf = _small("self_consistency").with_params({"think.n": 2})
        first = wf.run({"question": "What is 2 + 3?"}, seed=1, studio=studio, progress=False)
        assert first.status == "succeeded", first.error
        assert len(first.candidates("think")) == 2 and isinstance(first.outputs["answer"], str)
        assert first.stats.completion_tokens > 0 and first.stats.calls == 2
        loaded = studio.service.loaded_pool.loaded()
        assert len(loaded) == 1
        second = wf.run({"question": "What is 4 + 4?"}, seed=2, studio=studio, progress=False)
        assert second.status == "succeeded"
        again = studio.service.loaded_pool.loaded()
        assert [e["loaded_at"] for e in again] == [loaded[0]["loaded_at"]], "the second run reused the model"
        assert isinstance(second.figure("timeline"), go.Figure)
        assert metagen.trace(second.run_id, studio=studio).outputs == second.outputs
        pool = studio.service.loaded_pool
    assert pool.loaded() == []
    left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert left == [], "no engine or writer thread outlives the Studio"


def test_an_evaluation_on_the_real_model(tmp_path: Path) -> None:
    with metagen.Studio(trace_db=tmp_path / "t.db", workflows_dir=tmp_path / "wf",
                        models_dir=tmp_path / "m") as studio:
        result = metagen.evaluate([_small("chain_of_thought"), _small("self_consistency")], QUESTIONS,
                                  metric="number", sweep={"think.n": [1, 2]}, studio=studio, progress=False)
    assert result.status == "succeeded"
    assert len(result.points) == 3 and len(result.to_pandas()) == 3 * len(QUESTIONS)
    assert all(p["completion_tokens"] > 0 or p["cost_tokens"] > 0 for p in result.points)
    assert isinstance(result.figure("pareto"), go.Figure)


def test_the_readme_quick_start_runs_as_pasted(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## From Python"):]
    code = section[section.index("```python\n") + len("```python\n"):section.index("```\n", section.index("```python"))]
    assert code.count("\n") <= 6, "the quick start stays five lines"
    env = {**os.environ, "METAGEN_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    tokens, run_id = out.stdout.split()[-2:]
    assert int(tokens) > 0 and len(run_id) == 12
    assert (tmp_path / "votes.html").stat().st_size > 1_000_000  # plotly.js inlined
