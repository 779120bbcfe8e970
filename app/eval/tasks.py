"""Task presets (`tasks/*.yaml`): a benchmark's dataset, how its rows become a prompt and a reference, its metric.

A preset turns each row of its dataset into two columns the evaluation binds as usual: `question` (the prompt,
from `prompt`, a template over the row's columns) and `answer` (the reference: a column, a template, a regex
capture such as GSM8K's `#### N`, or the letter of the correct option for multiple choice). Workflows whose
main input has another name take it with `--map INPUT=question`.

Preset keys: name, title, description, dataset (a file or hf:OWNER/NAME[:CONFIG][@SPLIT], or a list of them whose
rows are joined), prompt, reference
{column | template, pattern}, choices {correct, others} or {column, answer_index}, metric, gold, notes, and
public_tests {template, asserts} or {docstring, asserts}: the examples a code workflow may see and select with (a
`public_tests` column: the template's lines, or the asserts made of the docstring examples of the text `docstring`
renders (HumanEval's `>>> f(x)` lines), with only the first `asserts` assert lines, as MBPP shows its first test),
apart from the hidden tests the `tests` metric grades with.
`gold` is the dataset's own right answer as a model would write it (a template over the row's columns, with
`{reference}` the preset's reference): `metagen eval check` grades it with the preset's metric (app/eval/gold.py).
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from app.eval.datasets import Dataset, DatasetError, load_dataset
from app.eval.docstring_tests import docstring_asserts
from app.eval.hub_datasets import is_hub_spec
from app.platform import resources

PROMPT_COLUMN = "question"
REFERENCE_COLUMN = "answer"
LETTERS = "ABCDEFGHIJ"
TESTS_METRIC = "tests"
TESTS_COLUMN = "tests"
PUBLIC_TESTS_COLUMN = "public_tests"
_FIELD = re.compile(r"(?<![\w}])\{([A-Za-z_][\w ]*)\}")
"""`{column}` in a template; braces right after a letter or a brace are LaTeX arguments (\\frac{a}{b})."""
_KEYS = {"name", "title", "description", "dataset", "prompt", "reference", "choices", "metric", "gold", "notes",
         "public_tests"}


class TaskError(ValueError):
    """A preset that does not exist or cannot be used; the message says which exist or what to fix."""


@dataclass(frozen=True)
class TaskPreset:
    name: str
    dataset: tuple[str, ...]
    prompt: str
    metric: str
    title: str = ""
    description: str = ""
    reference: dict[str, str] = field(default_factory=dict)
    choices: dict[str, Any] = field(default_factory=dict)
    notes: str = ""
    gold: str = ""
    """The gold answer: a template over the row (and `{reference}`), graded by `metagen eval check`."""
    public_tests: dict[str, Any] = field(default_factory=dict)
    """{template, asserts}: the row's `public_tests` column (its first `asserts` assert lines); empty: none."""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "title": self.title or self.name, "description": self.description,
                "dataset": " + ".join(self.dataset), "metric": self.metric, "notes": self.notes, "gold": self.gold}


def _from_yaml(path: Path) -> TaskPreset:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise TaskError(f"task preset {path.name} cannot be read: {exc}") from None
    if not isinstance(data, dict):
        raise TaskError(f"task preset {path.name} is not a mapping")
    unknown = sorted(set(data) - _KEYS)
    missing = [k for k in ("dataset", "prompt", "metric") if not data.get(k)]
    if unknown or missing:
        raise TaskError(f"task preset {path.name}: " + "; ".join(
            ([f"unknown keys {', '.join(unknown)}"] if unknown else []) +
            ([f"missing {', '.join(missing)}"] if missing else [])))
    if not data.get("reference") and not data.get("choices"):
        raise TaskError(f"task preset {path.name} needs a reference or choices")
    sources = data["dataset"] if isinstance(data["dataset"], list) else [data["dataset"]]
    return TaskPreset(name=str(data.get("name") or path.stem), dataset=tuple(str(d) for d in sources),
                      prompt=str(data["prompt"]), metric=str(data["metric"]), title=str(data.get("title") or ""),
                      description=str(data.get("description") or "").strip(),
                      reference=dict(data.get("reference") or {}), choices=dict(data.get("choices") or {}),
                      notes=str(data.get("notes") or "").strip(), gold=str(data.get("gold") or ""),
                      public_tests=_public_tests_spec(path, data.get("public_tests")))


def _public_tests_spec(path: Path, spec: Any) -> dict[str, Any]:
    if spec is None:
        return {}
    asserts = spec.get("asserts", 1) if isinstance(spec, dict) else None
    sources = [k for k in ("template", "docstring") if isinstance(spec, dict) and isinstance(spec.get(k), str)]
    if not isinstance(spec, dict) or len(sources) != 1 or not isinstance(asserts, int) or isinstance(asserts, bool) \
            or asserts < 1 or set(spec) - {"template", "docstring", "asserts"}:
        raise TaskError(f"task preset {path.name}: public_tests must be {{template: TEXT, asserts: N}} or "
                        "{docstring: TEXT, asserts: N} (the docstring examples of TEXT, `>>> f(x)` then the value, "
                        "as asserts; N >= 1: how many assert lines the workflow may see)")
    return {sources[0]: spec[sources[0]], "asserts": asserts}


def public_tests(task: TaskPreset, row: dict[str, Any]) -> str:
    """The preset's public tests of a row: its template's lines, or the asserts of the docstring examples its
    `docstring` template renders (those calling the row's `entry_point`; `assert callable(entry_point)` when it
    shows none), keeping only the first `asserts` assert lines."""
    spec = task.public_tests
    if "docstring" in spec:
        entry_point = str(row.get("entry_point") or "")
        lines = docstring_asserts(render(spec["docstring"], row), entry_point)
        if not lines and entry_point.isidentifier():  # no examples: the candidate must at least define it
            lines = [f"assert callable({entry_point})"]
    else:
        lines = render(spec["template"], row).splitlines()
    kept, seen = [], 0
    for line in lines:
        if line.strip().startswith("assert"):
            seen += 1
            if seen > spec["asserts"]:
                continue
        if line.strip():
            kept.append(line)
    return "\n".join(kept) + "\n" if kept else ""


def available_tasks(folder: Path | None = None) -> list[TaskPreset]:
    base = folder or resources.tasks_dir()
    return [_from_yaml(p) for p in sorted(base.glob("*.yaml"))]


def load_task(name: str, folder: Path | None = None) -> TaskPreset:
    """A preset by name (a file of tasks/, never a path)."""
    clean = str(name or "").strip()
    names = [t.name for t in available_tasks(folder)]
    if not clean or clean not in names:
        raise TaskError(f"no task preset {clean!r}; presets: {', '.join(names) or 'none'}")
    return next(t for t in available_tasks(folder) if t.name == clean)


# ------------------------------------------------------------------ rows


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "\n".join(_text(v) for v in value)
    return "" if value is None else str(value)


def render(template: str, row: dict[str, Any]) -> str:
    """`{column}` replaced by the row's value (lists one item a line); KeyError for a column the row lacks."""
    return _FIELD.sub(lambda m: _text(row[m.group(1)]), template)


def _reference(task: TaskPreset, row: dict[str, Any]) -> str | None:
    spec = task.reference
    text = render(spec["template"], row) if "template" in spec else _text(row.get(spec.get("column", "answer")))
    pattern = spec.get("pattern")
    if pattern:
        found = re.search(pattern, text, re.MULTILINE)
        if not found:
            return None
        text = found.group(1) if found.groups() else found.group(0)
    return text.strip().replace(",", "") if pattern else text


def _options(task: TaskPreset, row: dict[str, Any], index: int) -> tuple[list[str], str]:
    """The options in the order shown, and the letter of the correct one."""
    spec = task.choices
    if "column" in spec:
        options = [_text(o) for o in row[spec["column"]]]
        index = int(row[spec["answer_index"]])
        if not 0 <= index < min(len(options), len(LETTERS)):
            raise IndexError(f"{spec['answer_index']} = {index} names none of the {len(options)} options")
        return options, LETTERS[index]
    correct = _text(row[spec["correct"]]).strip()
    options = [correct, *(_text(row[c]).strip() for c in spec["others"])]
    random.Random(f"{spec.get('seed', 0)}:{index}").shuffle(options)  # the same order on every run
    return options, LETTERS[options.index(correct)]


def _task_row(task: TaskPreset, row: dict[str, Any], index: int) -> dict[str, Any]:
    values = dict(row)
    if task.choices:
        options, letter = _options(task, row, index)
        values["options"] = "\n".join(f"({LETTERS[i]}) {o}" for i, o in enumerate(options))
        reference: str | None = letter
    else:
        reference = _reference(task, row)
    if task.metric == TESTS_METRIC:  # the test program also under the name a code-execution metric may read
        values[TESTS_COLUMN] = reference
    if task.public_tests:
        values[PUBLIC_TESTS_COLUMN] = public_tests(task, row)
    return {**values, PROMPT_COLUMN: render(task.prompt, values), REFERENCE_COLUMN: reference}


def apply_task(task: TaskPreset, dataset: Dataset) -> Dataset:
    """The dataset with `question` (the prompt) and `answer` (the reference) made by the preset; a row the
    preset cannot read (a missing column) is reported with its number."""
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    for index, row in enumerate(dataset.rows):
        try:
            rows.append(_task_row(task, row, index))
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            problems.append(f"{dataset.where(index)}: preset {task.name} cannot read it ({type(exc).__name__}: "
                            f"{exc}); columns: {', '.join(dataset.columns)}")
    if problems:
        raise DatasetError(problems)
    made = [c for c in ("options", TESTS_COLUMN, PUBLIC_TESTS_COLUMN, PROMPT_COLUMN, REFERENCE_COLUMN)
            if c in rows[0]] if rows else []
    columns = [*dataset.columns, *(c for c in made if c not in dataset.columns)]
    return Dataset(path=dataset.path, rows=rows, columns=columns, sha256=dataset.sha256, lines=dataset.lines)


def source_columns(task: TaskPreset) -> list[str]:
    """The columns of its dataset a preset reads (its prompt's, its reference's, its choices'): what a local copy
    given in place of the Hub's must have."""
    made = {"options", TESTS_COLUMN, PUBLIC_TESTS_COLUMN}
    texts = [task.prompt, str(task.reference.get("template") or ""), str(task.public_tests.get("template") or ""),
             str(task.public_tests.get("docstring") or "")]
    columns = [m.group(1) for text in texts for m in _FIELD.finditer(text)]
    if task.reference and "template" not in task.reference:
        columns.append(str(task.reference.get("column", REFERENCE_COLUMN)))
    choices = task.choices
    columns += [str(choices[k]) for k in ("column", "answer_index", "correct") if k in choices]
    columns += [str(c) for c in choices.get("others") or []]
    return [c for c in dict.fromkeys(columns) if c not in made]


def local_copy_hint(task: TaskPreset) -> str:
    """How to evaluate a preset without the Hub: its dataset as a local file."""
    return (f"To run task {task.name} without the Hub, give a copy of its dataset ({' + '.join(task.dataset)}) as a "
            f"local JSONL, CSV, JSON or Parquet file with the columns {', '.join(source_columns(task))}: "
            f"`metagen eval WORKFLOW --task {task.name} --data FILE` (the preset still makes the prompts and "
            "references); in the studio's Evaluate tab, upload the file (or put it in the datasets folder), pick it "
            f"as the Dataset and pick {task.name} in the Task preset list, then Check the grader or Start")


def load_task_rows(task: TaskPreset, data: str | Path | None = None) -> Dataset:
    """The preset's dataset as read (or `data` in its place: a local copy), rows joined when it names several. A
    preset's own Hub dataset that cannot be loaded (offline: at once, `hub_datasets`) says how to give a local copy
    instead."""
    sources = [data] if data else list(task.dataset)
    try:
        parts = [load_dataset(s) for s in sources]
    except DatasetError as exc:
        if data or not any(is_hub_spec(str(s)) for s in sources):
            raise
        raise DatasetError("; ".join(exc.problems) + ". " + local_copy_hint(task)) from None
    if len(parts) == 1:
        return parts[0]
    rows = [row for part in parts for row in part.rows]
    columns = list(dict.fromkeys(c for part in parts for c in part.columns))
    digest = hashlib.sha256("".join(p.sha256 for p in parts).encode()).hexdigest()
    return Dataset(path=Path(" + ".join(str(p.path) for p in parts)), rows=rows, columns=columns, sha256=digest)


def load_task_dataset(task: TaskPreset, data: str | Path | None = None) -> Dataset:
    """The preset's dataset (or `data` in its place), with the preset's `question` and `answer` columns made."""
    return apply_task(task, load_task_rows(task, data))


def task_row(task: TaskPreset, row: dict[str, Any], index: int) -> dict[str, Any]:
    """One dataset row as the preset makes it (its `question`, `answer` and, for code, `tests` columns)."""
    return _task_row(task, row, index)
