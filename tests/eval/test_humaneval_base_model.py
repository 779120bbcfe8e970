"""A base model completing HumanEval the way the benchmark's authors ran it (Gemma 3 270M, the second real model):
the humaneval_base preset's raw prompt, the code_completion workflow's verbatim, echoed completion, graded as prompt
+ completion. Stripped completions made every such program an IndentationError (0/10 by hand on main)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from app.eval.tasks import load_task, task_row
from app.run.providers import llama_provider
from app.run.scheduler import SUCCEEDED, Scheduler
from app.workflow.spec import load_workflow_text
from backends.pool import ModelPool
from nodes.algorithms.code_tests import run_code_tests
from nodes.registry import default_registry
from tests.eval.humaneval_data import problems
from tests.second_model import gemma_model_path

WORKFLOW = Path(__file__).resolve().parents[2] / "workflows" / "code_completion.yaml"


@pytest.mark.model
def test_gemma_base_completion_is_a_whole_indented_program() -> None:
    problem = next(p for p in problems() if p["task_id"] == "HumanEval/2")
    row = task_row(load_task("humaneval_base"), problem, 0)
    data = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    data["models"] = {"main": {"source": "path", "path": str(gemma_model_path()), "n_ctx": 1024}}
    data["nodes"][0]["params"]["max_tokens"] = 48
    workflow = load_workflow_text(yaml.safe_dump(data))
    pool = ModelPool()
    try:
        result = Scheduler(default_registry(), llama_provider(pool)).run(workflow, inputs={"question": row["question"]},
                                                                         seed=0)
    finally:
        pool.close()
    assert result.status == SUCCEEDED, result.error
    answer = result.outputs["answer"]
    completion = answer[len(problem["prompt"]):]
    assert answer.startswith(problem["prompt"]) and completion.startswith("    "), answer
    report = run_code_tests(answer, tests=row["tests"], entry_point=problem["entry_point"])
    assert "IndentationError" not in report.reason and "SyntaxError" not in report.reason, report.reason
