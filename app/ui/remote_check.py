"""The Models tab's "Check a remote server" section: contact an OpenAI-compatible server, show what it supports."""

from __future__ import annotations

import logging
from typing import Any

import gradio as gr
import yaml

from app.service.errors import UserError
from app.service.studio import StudioService

log = logging.getLogger(__name__)


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def remote_report_markdown(report: dict[str, Any]) -> str:
    """The findings of ModelCatalog.check_remote as Markdown: models, a capability table, notes, the entry to use."""
    models = ", ".join(f"`{m}`" for m in report["models"][:20]) or "(none listed)"
    more = f" and {len(report['models']) - 20} more" if len(report["models"]) > 20 else ""
    lines = [f"**{_cell(report['server'])}** at `{report['base_url']}` — models: {models}{more}", "",
             f"What `{_cell(report['model'])}` supports there:", "", "| feature | support |", "|---|---|"]
    lines += [f"| {_cell(k)} | {_cell(v)} |" for k, v in report["rows"][1:]]
    lines += [""] + [f"- note: {_cell(n)}" for n in report["notes"]]
    entry = yaml.safe_dump({"models": {"main": report["entry"]}}, sort_keys=False, default_flow_style=None)
    lines += ["", "In a workflow:", "", "```yaml", entry.strip(), "```"]
    return "\n".join(lines)


SERVER_COLUMNS = ("model", "url", "up", "outstanding", "served", "mean_latency_s", "error")


def servers_markdown(rows: list[dict[str, Any]]) -> str:
    """The servers of remote models on several servers (ModelCatalog.remote_servers) as a Markdown table."""
    if not rows:
        return ("No model on several servers has run yet (a `source: openai` entry whose `base_url` lists "
                "servers); run one, then Refresh.")
    head = "| " + " | ".join(SERVER_COLUMNS) + " |\n|" + "---|" * len(SERVER_COLUMNS)
    def cell(row: dict[str, Any], column: str) -> str:
        if column == "up":
            return "up" if row.get("up") else "down"
        return "" if row.get(column) is None else _cell(row[column])

    body = ["| " + " | ".join(cell(r, c) for c in SERVER_COLUMNS) + " |" for r in rows]
    return "\n".join([head, *body])


def remote_servers_section(service: StudioService) -> None:
    """Each server of the remote models that run on several servers: up or down, requests outstanding and served,
    mean latency (the owner's view; hidden on a shared app)."""
    with gr.Accordion("Servers of remote models on several servers", open=False,
                      visible=not service.policy.share_mode, elem_id="mg-remote-servers"):
        table = gr.Markdown(elem_id="mg-remote-servers-table")
        refresh = gr.Button("Refresh", elem_id="mg-remote-servers-refresh", size="sm")
    refresh.click(lambda: servers_markdown(service.models.remote_servers()), [], [table])


def remote_check_section(service: StudioService) -> None:
    """Build the section inside the current Blocks context (hidden on a shared app: visitors may not make this
    machine contact addresses of their choosing)."""
    with gr.Accordion("Check a remote server (vLLM, SGLang, llama.cpp, Ollama, OpenAI-compatible)", open=False,
                      visible=not service.policy.share_mode, elem_id="mg-remote-check"):
        with gr.Row():
            url = gr.Textbox(label="Base URL", placeholder="http://127.0.0.1:8000/v1", elem_id="mg-remote-url",
                             scale=3)
            model = gr.Textbox(label="Model", placeholder="empty: the first the server lists",
                               elem_id="mg-remote-model", scale=2)
            key_env = gr.Textbox(label="API key variable", placeholder="e.g. OPENAI_API_KEY (its name, not the key)",
                                 elem_id="mg-remote-key-env", scale=2)
            check = gr.Button("Check", elem_id="mg-remote-check-btn", scale=0)
        result = gr.Markdown(elem_id="mg-remote-result")

    def run_check(base_url: str, model_name: str, env_name: str) -> str:
        try:
            return remote_report_markdown(service.models.check_remote(base_url, model_name, env_name))
        except UserError as exc:
            return f"Cannot check: {exc}"
        except Exception as exc:
            log.exception("remote check failed")
            return f"Cannot check: {type(exc).__name__}: {exc}"

    check.click(run_check, [url, model, key_env], [result])
