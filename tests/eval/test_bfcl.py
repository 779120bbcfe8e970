"""The BFCL presets on the real bfcl-eval wheel's data: every gold answer graded right, the port of BFCL's AST
checker giving the wheel's own checker's verdict on the possible answers and on wrong calls made from them, the
tools converted as BFCL's OpenAI handler converts them, and an evaluation over a preset on the scripted fake."""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.cli.main import main
from app.eval.bfcl_checker import ast_check
from app.eval.bfcl_data import gold_calls, load_rows, openai_tools
from app.eval.gold import check_gold
from app.eval.metrics import parse_metric
from app.eval.tasks import load_task, load_task_dataset
from backends.tools.types import ToolAnswer, ToolCall, answer_json


def test_the_bfcl_wheel_is_installed() -> None:
    """`make setup` installs it (without its vendor SDKs): every test below reads its data and checker."""
    assert importlib.util.find_spec("bfcl_eval") is not None, \
        "bfcl-eval is not installed: run `make setup` (pip install --no-deps bfcl-eval==2026.3.23)"

PRESETS = {"bfcl_simple": 400, "bfcl_multiple": 200, "bfcl_parallel": 200, "bfcl_irrelevance": 240}
CATEGORIES = ("simple_python", "multiple", "parallel")
WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"


@pytest.mark.parametrize(("name", "rows"), PRESETS.items())
def test_every_gold_answer_of_each_preset_is_graded_right(name: str, rows: int) -> None:
    check = check_gold(load_task(name), workers=1)
    assert (check.total, check.correct, check.failures) == (rows, rows, [])


@pytest.fixture(scope="module")
def wheel_checker() -> Iterator[Any]:
    """The wheel's own ast_checker, imported with its model table (which imports every vendor's SDK) replaced by
    one OpenAI-style model: dots in function names as underscores, as the presets name the tools."""
    stub = types.ModuleType("bfcl_eval.constants.model_config")
    stub.MODEL_CONFIG_MAPPING = {"metagen": types.SimpleNamespace(underscore_to_dot=True)}  # type: ignore[attr-defined]
    saved = {k: v for k, v in sys.modules.items() if k.startswith("bfcl_eval")}
    sys.modules["bfcl_eval.constants.model_config"] = stub
    try:
        from bfcl_eval.constants.enums import Language
        from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker

        yield lambda funcs, output, possible, category: ast_checker(funcs, output, possible, Language.PYTHON,
                                                                    category, "metagen")
    finally:
        for k in [k for k in sys.modules if k.startswith("bfcl_eval")]:
            del sys.modules[k]
        sys.modules.update(saved)


def _outputs(calls: tuple[ToolCall, ...]) -> list[dict[str, Any]]:
    return [{c.name: copy.deepcopy(dict(c.arguments))} for c in calls]


def variants(ref: dict[str, Any]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """The gold answer, every other acceptable value of each parameter, and wrong calls made from it."""
    funcs, truth = ref["functions"], ref["ground_truth"]
    gold = _outputs(gold_calls(funcs, truth).calls)
    yield "gold", gold
    for k, answer in enumerate(truth):
        name, params = next(iter(answer.items()))
        for param, values in params.items():
            for v in values[1:]:
                out = copy.deepcopy(gold)
                args = next(iter(out[k].values()))
                if v == "":
                    args.pop(param, None)
                else:
                    args[param] = v
                yield f"{param}={v!r}", out
            out = copy.deepcopy(gold)
            args = next(iter(out[k].values()))
            value = args.get(param)
            changed = {int: lambda x: float(x), float: lambda x: int(x) if x == int(x) else x + 1,
                       str: lambda x: x.upper() + "!", bool: lambda x: not x, list: lambda x: x[::-1] + x}
            if type(value) in changed:
                args[param] = changed[type(value)](value)  # type: ignore[operator]
                yield f"{param} changed", out
            out = copy.deepcopy(gold)
            next(iter(out[k].values())).pop(param, None)
            yield f"{param} left out", out
        out = copy.deepcopy(gold)
        next(iter(out[k].values()))["unexpected"] = 1
        yield "an extra argument", out
        out = copy.deepcopy(gold)
        out[k] = {name + "_x": next(iter(out[k].values()))}
        yield "another function", out
    yield "reversed calls", gold[::-1]
    yield "one call more", gold + gold[:1]
    yield "no call", []


@pytest.mark.parametrize("category", CATEGORIES)
def test_the_port_decides_as_the_wheels_ast_checker(category: str, wheel_checker: Any) -> None:
    rows, _ = load_rows(f"bfcl:{category}")
    compared = disagreements = 0
    examples = []
    for row in rows:
        ref = json.loads(row["reference"])
        for label, output in variants(ref):
            ours = ast_check(ref["functions"], copy.deepcopy(output), ref["ground_truth"], category)["valid"]
            theirs = wheel_checker(ref["functions"], copy.deepcopy(output), ref["ground_truth"], category)["valid"]
            compared += 1
            if ours != theirs:
                disagreements += 1
                examples.append((row["id"], label, ours, theirs))
    assert compared > 5 * len(rows) and disagreements == 0, examples[:5]


def test_tools_are_converted_as_bfcls_openai_handler_converts_them() -> None:
    funcs = [{"name": "math.hypot", "description": "Norm.", "parameters": {
        "type": "dict", "required": ["x"], "properties": {
            "x": {"type": "float", "description": "X."}, "pair": {"type": "tuple", "items": {"type": "integer"}},
            "opts": {"type": "dict", "properties": {"k": {"type": "any"}}}, "what": {"description": "no type"}}}}]
    (tool,) = openai_tools(funcs)
    fn = tool["function"]
    assert tool["type"] == "function" and fn["name"] == "math_hypot" and fn["parameters"]["type"] == "object"
    props = fn["parameters"]["properties"]
    assert props["x"] == {"type": "number", "format": "float", "description": "X. This is a float type value."}
    assert props["pair"]["type"] == "array" and props["pair"]["items"] == {"type": "integer"}
    assert props["opts"]["type"] == "object" and props["opts"]["properties"]["k"]["type"] == "string"
    assert props["what"]["type"] == "string" and funcs[0]["parameters"]["type"] == "dict"  # the docs left as read


def test_the_metric_reads_tool_answers() -> None:
    metric = parse_metric("bfcl")
    row = load_task_dataset(load_task("bfcl_simple")).rows[0]  # calculate_triangle_area(base=10, height=5)
    assert row["tools"][0]["function"]["name"] == "calculate_triangle_area" and row["messages"][0]["role"] == "user"
    reference = row["answer"]

    def grade(*calls: ToolCall) -> tuple[bool, str]:
        g = metric.grade(answer_json(ToolAnswer("", calls)), row, reference, {})
        return g.correct, g.detail

    assert grade(ToolCall("calculate_triangle_area", {"height": 5.0, "base": 10}))[0] is False  # integer params
    assert grade(ToolCall("calculate_triangle_area", {"height": 5, "base": 10, "unit": "Units"}))[0]
    ok, detail = grade(ToolCall("calculate_triangle_area", {"base": 10}))
    assert not ok and "Missing required parameter: 'height'" in detail
    assert metric.grade("The area is 25.", row, reference, {}).detail == "no call made"
    irrelevant = load_task_dataset(load_task("bfcl_irrelevance")).rows[0]
    assert metric.grade("I cannot do that.", irrelevant, irrelevant["answer"], {}).correct
    assert not metric.grade(answer_json(ToolAnswer("", (ToolCall("f", {}),))), irrelevant,
                            irrelevant["answer"], {}).correct


@pytest.mark.parametrize(("task", "correct"), [("bfcl_irrelevance", 3), ("bfcl_simple", 0)])
def test_an_evaluation_over_a_preset_runs_on_the_fake(task: str, correct: int, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The dry-run fake answers text: right where no call is wanted, wrong where one is."""
    code = main(["eval", str(WORKFLOWS / "tool_self_consistency.yaml"), "--task", task, "--limit", "3", "--dry-run",
                 "--db", str(tmp_path / "t.db"), "--json", "-q"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    (point,) = out["points"]
    assert (point["total"], point["correct"]) == (3, correct)
