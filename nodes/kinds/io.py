"""Helper kinds: workflow `input` / `output` (palette entries for the YAML sections) and `template`.

`input` and `output` carry `section = "inputs"` / `"outputs"`: the editor draws them as nodes but
saves them under the workflow's `inputs:` / `outputs:` sections; validation refuses them in `nodes:`.
`template` renders text from its inputs; a candidate set becomes a numbered list ("[1] ...\n\n[2] ..."),
which is how universal self-consistency shows the model its drafts.
"""

from __future__ import annotations

from typing import Any, ClassVar

from nodes.base import JSON, TEXT, NodeContext, NodeKind, Param, Port
from nodes.decoding import render


class InputNode(NodeKind):
    """A typed workflow input (lives in the `inputs:` section)."""

    kind = "input"
    title = "Input"
    category = "io"
    description = "A workflow input with a type and a default; wire `value` into prompts as {name}."
    section: ClassVar[str] = "inputs"
    outputs = (Port("value", JSON, "The input's value"),)
    params = (
        Param("name", "str", "question", "Input name (an identifier; referenced as inputs.<name>)", required=True),
        Param("type", "choice", "text", "Value type", choices=("text", "number", "json")),
        Param("default", "json", "", "Value used when the run does not give one"),
        Param("description", "str", "", "What the input is, shown in forms and the CLI"),
    )

    def run(self, inputs: dict[str, Any], params: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
        return {"value": inputs.get("value", params.get("default"))}


class OutputNode(NodeKind):
    """A named workflow output (lives in the `outputs:` section)."""

    kind = "output"
    title = "Output"
    category = "io"
    description = "A named workflow output: whatever is wired into `value` is reported under this name."
    section: ClassVar[str] = "outputs"
    inputs = (Port("value", JSON, "The value to report"),)
    params = (Param("name", "str", "answer", "Output name", required=True),)

    def run(self, inputs: dict[str, Any], params: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
        return {"value": inputs.get("value")}


class TemplateNode(NodeKind):
    """String templating and joining: {variables} from any inputs, candidate sets as numbered lists."""

    kind = "template"
    title = "Template"
    category = "text"
    description = ("Render text from a template with {variables} wired from any outputs; a candidate set "
                   "renders as a numbered list (e.g. 'Here are 5 drafts: ... pick the most consistent').")
    outputs = (Port("text", TEXT, "The rendered text"),)
    params = (Param("template", "text", "{text}", "Text with {variables}; {{ and }} are literal braces",
                    required=True),)
    variadic_inputs = True

    def run(self, inputs: dict[str, Any], params: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
        return {"text": render(params["template"], inputs)}
