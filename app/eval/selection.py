"""What a workflow's selection sees of an evaluation's data, checked as the plan is made.

Two warnings (`EvalPlan.warnings`, shown by the CLI and kept in the summary): a verifier (or voter, refiner,
search) that receives the column the metric grades with (best-of-N then equals pass@N by construction: an oracle
picks, not the method), and one whose input has no column, so every item is selected with the input's default.
"""

from __future__ import annotations

from collections.abc import Iterable

from app.eval.datasets import Binding
from app.workflow.spec import NodeSpec, Workflow

SELECTING_KINDS = ("verifier", "voter", "refiner", "search")
"""Node kinds whose result decides which candidate wins (scores, votes, feedback, search)."""
PASS_THROUGH_KINDS = ("template",)
"""Node kinds that hand a text on unchanged in substance (a verifier fed through a template still sees it)."""
TESTS_COLUMNS = ("tests", "io_tests")
"""The columns the `tests` metric runs (app.eval.metrics._tests_metric)."""
TESTS_WARNING = "selection uses the grading tests: best-of-N equals pass@N here"
INPUT_PREFIX = "inputs."


def graded_columns(metric: str, reference: str | None, reference_graded: bool) -> list[str]:
    """The dataset columns a metric grades with: the tests metric's tests, and the reference when it is graded."""
    columns = list(TESTS_COLUMNS) if metric == "tests" else []
    if reference and reference_graded and reference not in columns:
        columns.append(reference)
    return columns


def selecting_nodes(wf: Workflow, inputs: Iterable[str]) -> list[str]:
    """Ids of the selecting nodes that receive any of these workflow inputs, wired directly or through templates."""
    refs = {f"{INPUT_PREFIX}{name}" for name in inputs}
    carriers: set[str] = set()  # template nodes that hand one of them on

    def fed(node: NodeSpec) -> bool:
        return any(isinstance(ref, str) and (ref in refs or ref.split(".", 1)[0] in carriers)
                   for ref in node.inputs.values())

    reached: list[str] = []
    changed = bool(refs)
    while changed:  # a workflow is a DAG and each node is added once: this ends
        changed = False
        for node in wf.nodes:
            if node.id in carriers or node.id in reached or not fed(node):
                continue
            if node.kind in PASS_THROUGH_KINDS:
                carriers.add(node.id)
                changed = True
            elif node.kind in SELECTING_KINDS:
                reached.append(node.id)
    return reached


def grading_leaks(wf: Workflow, name: str, binding: Binding, metric: str, reference_graded: bool) -> list[str]:
    """One warning per graded column a selecting node of the workflow receives ([] when selection is blind to it)."""
    warnings = []
    for column in graded_columns(metric, binding.reference, reference_graded):
        bound = [inp for inp, col in binding.inputs.items() if col == column]
        nodes = selecting_nodes(wf, bound)
        if not nodes:
            continue
        who = f"node{'s' if len(nodes) > 1 else ''} {', '.join(nodes)}"
        if metric == "tests" and column in TESTS_COLUMNS:
            warnings.append(f"{name}: {TESTS_WARNING} ({who} receive{'' if len(nodes) > 1 else 's'} the column "
                            f"{column!r} that the `tests` metric grades with; give the workflow the examples a "
                            "problem shows, e.g. a `public_tests` column, and keep the graded tests hidden)")
        else:
            warnings.append(f"{name}: selection uses the graded reference: {who} receive{'' if len(nodes) > 1 else 's'}"
                            f" the column {column!r} that the `{metric}` metric compares with, so the score "
                            "measures an oracle, not the method")
    return warnings


def default_selection(wf: Workflow, name: str, binding: Binding) -> list[str]:
    """One warning per workflow input that feeds a selecting node but has no column: every item is then selected
    with the same default text (e.g. another problem's example tests)."""
    warnings = []
    for inp in wf.inputs:
        if inp in binding.inputs:
            continue
        nodes = selecting_nodes(wf, [inp])
        if nodes:
            warnings.append(f"{name}: input {inp!r} has no column in the dataset, so node"
                            f"{'s' if len(nodes) > 1 else ''} {', '.join(nodes)} select every item with its "
                            f"default; map a column to it (--map {inp}=COLUMN)")
    return warnings
