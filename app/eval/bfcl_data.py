"""BFCL (the Berkeley Function Calling Leaderboard, v4) as evaluation rows, read offline from the `bfcl-eval` wheel's
own data files: `bfcl:CATEGORY` (simple_python, multiple, parallel, irrelevance, ...) names
`bfcl_eval/data/BFCL_v4_CATEGORY.json` with its `possible_answer/` file, and the `bfcl` metric grades a workflow's
tool-call answer with BFCL's AST checker (app/eval/bfcl_checker.py).

Each row has the columns `id`, `question` (the user's request), `messages` (the conversation, OpenAI chat shape),
`tools` (BFCL's function docs as OpenAI chat function tools, converted as BFCL's OpenAI handler converts them:
`dict` -> object, `float` -> number, `tuple` -> array, `any` -> string, dots in names as underscores), `reference`
(JSON text: the category, BFCL's function docs and possible answers, what the grader reads) and `gold` (a right
answer as a workflow answers, `answer_json` of calls: the first acceptable value of each parameter, optional ones
left out where the possible answer allows it).
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import re
from pathlib import Path
from typing import Any

from app.eval.bfcl_checker import ast_check
from backends.tools.types import ToolAnswer, ToolCall, answer_json, parse_answer_json

PREFIX = "bfcl:"
VERSION = "BFCL_v4"
GORILLA_TO_OPENAPI = {
    "integer": "integer", "number": "number", "float": "number", "string": "string", "boolean": "boolean",
    "bool": "boolean", "array": "array", "list": "array", "dict": "object", "object": "object", "tuple": "array",
    "any": "string", "byte": "integer", "short": "integer", "long": "integer", "double": "number", "char": "string",
    "ArrayList": "array", "Array": "array", "HashMap": "object", "Hashtable": "object", "Queue": "array",
    "Stack": "array", "Any": "string", "String": "string", "Bigint": "integer",
}
"""bfcl_eval/constants/type_mappings.py's GORILLA_TO_OPENAPI."""
INSTALL_HINT = ("BFCL's data comes from the bfcl-eval wheel: install it without its dependencies (its data files and "
                "checker need none): pip install --no-deps bfcl-eval")


class BfclError(ValueError):
    """BFCL's data cannot be read (the wheel missing, an unknown category); the message says how to fix it."""


def is_bfcl_spec(text: str) -> bool:
    return str(text).startswith(PREFIX)


def data_dir() -> Path:
    """The wheel's data folder, found without importing the package (its handlers import a dozen vendors' SDKs)."""
    spec = importlib.util.find_spec("bfcl_eval")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        folder = Path(location) / "data"
        if folder.is_dir():
            return folder
    raise BfclError(f"BFCL's data files are not installed. {INSTALL_HINT}")


def categories() -> list[str]:
    """The single-turn categories whose questions the wheel ships."""
    return sorted(p.stem.removeprefix(f"{VERSION}_") for p in data_dir().glob(f"{VERSION}_*.json"))


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _cast_to_openai_type(properties: dict[str, Any], mapping: dict[str, str]) -> dict[str, Any]:
    """bfcl_eval/model_handler/utils.py's `_cast_to_openai_type`, as its OpenAI handler applies it."""
    for key, value in properties.items():
        if "type" not in value:
            properties[key]["type"] = "string"
        else:
            var_type = value["type"]
            if mapping is GORILLA_TO_OPENAPI and var_type == "float":
                properties[key]["format"] = "float"
                properties[key]["description"] = properties[key].get("description", "") + \
                    " This is a float type value."
            properties[key]["type"] = mapping.get(var_type, "string")
        if properties[key]["type"] in ("array", "object"):
            if "properties" in properties[key]:
                properties[key]["properties"] = _cast_to_openai_type(properties[key]["properties"], mapping)
            elif "items" in properties[key]:
                items = properties[key]["items"]
                items["type"] = mapping[items["type"]]
                if items["type"] == "array" and "items" in items:
                    items["items"]["type"] = mapping[items["items"]["type"]]
                elif items["type"] == "object" and "properties" in items:
                    items["properties"] = _cast_to_openai_type(items["properties"], mapping)
    return properties


def openai_tools(functions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """BFCL's function docs as OpenAI chat function tools (its `convert_to_tool` for OpenAI completions)."""
    tools = []
    for item in copy.deepcopy(functions):
        item["name"] = re.sub(r"\.", "_", item["name"])
        item["parameters"]["type"] = "object"
        item["parameters"]["properties"] = _cast_to_openai_type(item["parameters"]["properties"], GORILLA_TO_OPENAPI)
        tools.append({"type": "function", "function": item})
    return tools


def _chosen(options: list[Any]) -> Any:
    """The first acceptable value of a parameter's options, its own options chosen likewise inside: a dict's
    values (and the dicts of a list of dicts) list options per key, as the parameter itself does."""
    return _picked(next(v for v in options if v != ""))


def _picked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _chosen(v) for k, v in value.items() if isinstance(v, list) and any(x != "" for x in v)
                and "" not in v}
    if isinstance(value, list):
        return [_picked(v) if isinstance(v, dict) else v for v in value]
    return value


def gold_calls(functions: list[dict[str, Any]], ground_truth: list[dict[str, Any]]) -> ToolAnswer:
    """A right answer made from the possible answers: per parameter its first acceptable value, an optional one
    left out where "" is acceptable."""
    calls = []
    for answer in ground_truth:
        name, params = next(iter(answer.items()))
        doc = next((f for f in functions if f["name"] == name), functions[0])
        required = set(doc["parameters"].get("required", []))
        args = {}
        for param, values in params.items():
            given = [v for v in values if v != ""]
            if not given or ("" in values and param not in required):
                continue
            args[param] = _chosen(values)
        calls.append(ToolCall(re.sub(r"\.", "_", name), args))
    return ToolAnswer("", tuple(calls))


def load_rows(spec: str) -> tuple[list[dict[str, Any]], str]:
    """The rows of `bfcl:CATEGORY` and the hash of the files they come from."""
    category = spec.removeprefix(PREFIX).strip()
    folder = data_dir()
    questions = folder / f"{VERSION}_{category}.json"
    if not category or not questions.is_file():
        raise BfclError(f"no BFCL category {category!r}; the wheel ships: {', '.join(categories())}")
    answers_file = folder / "possible_answer" / questions.name
    answers = {a["id"]: a["ground_truth"] for a in _jsonl(answers_file)} if answers_file.is_file() else {}
    digest = hashlib.sha256(questions.read_bytes() + (answers_file.read_bytes() if answers else b"")).hexdigest()
    rows = []
    for entry in _jsonl(questions):
        turns = entry["question"]
        if len(turns) != 1:
            raise BfclError(f"BFCL category {category} is multi-turn ({entry['id']}); only single-turn categories "
                            "can be evaluated")
        messages = [dict(m) for m in turns[0]]
        ground_truth = answers.get(entry["id"], [])
        functions = entry["function"]
        user = [m for m in messages if m.get("role") == "user"]
        rows.append({
            "id": entry["id"], "question": str(user[-1]["content"]) if user else "", "messages": messages,
            "tools": openai_tools(functions),
            "reference": json.dumps({"category": category, "functions": functions, "ground_truth": ground_truth},
                                    ensure_ascii=False),
            "gold": answer_json(gold_calls(functions, ground_truth)) if ground_truth else answer_json(
                ToolAnswer("I cannot help with that using the functions I have.")),
        })
    return rows, digest


def grade_answer(output: Any, reference: str | None) -> tuple[bool, str]:
    """Whether a workflow's answer (answer_json text; other text is an answer without calls) is right for the row
    whose `reference` this is, and why not: irrelevance is right when no call is made; the rest are graded by
    BFCL's AST checker."""
    if not reference:
        return False, "no reference for this row"
    ref = json.loads(reference)
    answer = parse_answer_json(output) if isinstance(output, str) else None
    calls = answer.calls if answer is not None else ()
    category = str(ref["category"])
    if "irrelevance" in category:
        return (not calls), ("no call, as it should" if not calls else
                             f"called {', '.join(c.name for c in calls)} where no function fits")
    if not calls:
        return False, "no call made"
    model_output = [{c.name: dict(c.arguments)} for c in calls]
    result = ast_check(ref["functions"], model_output, ref["ground_truth"], category)
    return bool(result["valid"]), "; ".join(str(e) for e in result.get("error", []))[:300] or "valid"
