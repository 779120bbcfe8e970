"""Fixtures of the MCP tests: this folder's small workflows, a dry-run service holding them, and helpers to read a
tool result's parts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import mcp_types as types

ROOT = Path(__file__).resolve().parents[2]
TEST_WORKFLOWS = Path(__file__).resolve().parent / "workflows"


def copy_workflows(target: Path) -> Path:
    target.mkdir(parents=True, exist_ok=True)
    for path in TEST_WORKFLOWS.glob("*.yaml"):
        shutil.copyfile(path, target / path.name)
    return target


def text_of(result: types.CallToolResult) -> str:
    return "".join(part.text for part in result.content if isinstance(part, types.TextContent))


def resource_json(result: types.ReadResourceResult) -> dict[str, Any]:
    part = result.contents[0]
    assert isinstance(part, types.TextResourceContents) and part.mime_type == "application/json"
    return json.loads(part.text)  # type: ignore[no-any-return]
