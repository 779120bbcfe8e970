"""JSON Schemas of a workflow as an MCP tool: its declared inputs as the tool's arguments, its outputs, run id
and stats as the structured result."""

from __future__ import annotations

from typing import Any

from app.workflow.spec import Workflow
from app.workflow.validation import ref_type
from nodes.registry import NodeRegistry

INPUT_TYPES: dict[str, dict[str, Any]] = {"text": {"type": "string"}, "number": {"type": "number"}, "json": {}}
"""A workflow input's type as JSON Schema (a json input takes any JSON value)."""
PORT_TYPES: dict[str, dict[str, Any]] = {"text": {"type": ["string", "null"]}, "number": {"type": ["number", "null"]},
                                         "candidates": {"type": "object"}, "json": {}}
"""What an output of each port type holds once made JSON (a candidate set is an object; null when a node gave
none)."""
STATS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"tokens": {"type": "integer", "description": "Prompt plus completion tokens of the run"},
                   "seconds": {"type": "number", "description": "Wall time of the run"},
                   "lm_calls": {"type": "integer", "description": "Model calls the run made"}},
    "required": ["tokens", "seconds", "lm_calls"],
}


TOOL_ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Present when the main output is a tool-call answer: its text and the calls it makes",
    "properties": {
        "content": {"type": "string", "description": "Text beside the calls"},
        "tool_calls": {"type": "array", "items": {
            "type": "object", "required": ["name", "arguments"],
            "properties": {"name": {"type": "string"}, "arguments": {"type": "object"},
                           "text": {"type": "string", "description": "The call as name(arg=value, ...)"}}}},
    },
    "required": ["content", "tool_calls"],
}


def input_schema(wf: Workflow) -> dict[str, Any]:
    """The tool's arguments: one property per declared input (type, default, description); inputs without a
    default are required."""
    properties: dict[str, Any] = {}
    for name, spec in wf.inputs.items():
        prop = dict(INPUT_TYPES.get(spec.type, {}))
        if spec.description:
            prop["description"] = spec.description
        if spec.default is not None:
            prop["default"] = spec.default
        properties[name] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    required = [name for name, spec in wf.inputs.items() if spec.default is None]
    if required:
        schema["required"] = required
    return schema


def output_schema(wf: Workflow, registry: NodeRegistry) -> dict[str, Any]:
    """The structured result: `outputs` (each workflow output by its port type), `run_id` (read the trace as the
    resource metagen://runs/{run_id}), `stats`, and `tool_answer` when the answer is tool calls."""
    outputs = {}
    for name, ref in wf.outputs.items():
        port = ref_type(wf, registry, ref)
        outputs[name] = {**PORT_TYPES.get(port or "json", {}), "description": f"output {name} ({ref}, {port or 'any'})"}
    return {
        "type": "object",
        "properties": {
            "outputs": {"type": "object", "properties": outputs, "required": list(outputs)},
            "run_id": {"type": "string", "description": "The run's id: its trace is the resource metagen://runs/ID"},
            "stats": STATS_SCHEMA,
            "tool_answer": TOOL_ANSWER_SCHEMA,
        },
        "required": ["outputs", "run_id", "stats"],
    }
