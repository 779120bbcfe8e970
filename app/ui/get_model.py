"""The Models tab's "Get a model" section: search the Hub, a repo's GGUFs with whether each fits this machine and
the recommended quant, Pull with progress and Cancel, "Use in editor", and the catalog's recommendations.
Not built on a shared app (the service refuses it too)."""

from __future__ import annotations

import json
import logging
from typing import Any

import gradio as gr

from app.service.errors import UserError
from app.service.studio import StudioService

log = logging.getLogger(__name__)


def human_size(n: int | None) -> str:
    if not n:
        return ""
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit in ("B", "KB") else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"

FILE_COLUMNS = ["file", "quant", "size", "needs", "fits", "recommended"]
RECOMMENDED_COLUMNS = ["role", "model", "fits", "size", "repo", "file", "note"]


def file_rows(found: dict[str, Any]) -> list[list[Any]]:
    def fits(r: dict[str, Any]) -> str:
        if r["fits"] is None:
            return "unknown"
        return ("yes" if r["fits"] else "no") + ("" if r["kv_known"] else " (weights only)")

    return [[r["file"], r["quant"], human_size(r["size_bytes"]) or "?", human_size(r["need_bytes"]) or "?", fits(r),
             "★ recommended" if r["recommended"] else ""] for r in found["rows"]]


def recommended_rows(service: StudioService) -> list[list[Any]]:
    return [[e["role"], e["name"], e["fits"], f"{e['size_gb']:.2f} GB", e["repo"], e["file"], e.get("notes", "")]
            for e in service.hub.recommended()]


def get_model_section(service: StudioService) -> None:
    """Build the section inside the current Blocks context; nothing on a shared app."""
    if service.policy.share_mode:
        return
    with gr.Accordion("Get a model (Hugging Face Hub)", open=False, elem_id="mg-get-model"):
        with gr.Row():
            query = gr.Textbox(label="Search the Hub", placeholder="qwen3, llama 3.2, math-shepherd...",
                               elem_id="mg-hub-query", scale=3)
            search_btn = gr.Button("Search", elem_id="mg-hub-search", scale=0)
        repo = gr.Dropdown([], label="Repository", allow_custom_value=True, elem_id="mg-hub-repo",
                           info="pick a search result or type USER/REPO")
        with gr.Row():
            n_ctx = gr.Number(value=4096, precision=0, minimum=128, label="Context length for the estimate",
                              elem_id="mg-hub-ctx", scale=1)
            files_btn = gr.Button("Show GGUF files", elem_id="mg-hub-files", scale=0)
        files = gr.Dataframe(headers=FILE_COLUMNS, interactive=False, elem_id="mg-hub-table", wrap=True)
        with gr.Row():
            pick = gr.Dropdown([], label="File to pull", elem_id="mg-hub-pick", scale=3)
            pull_btn = gr.Button("Pull", variant="primary", elem_id="mg-hub-pull", scale=0)
            cancel_btn = gr.Button("Cancel", elem_id="mg-hub-cancel", scale=0)
            use_btn = gr.Button("Use in editor", elem_id="mg-hub-use", scale=0, interactive=False)
        status = gr.Markdown(elem_id="mg-hub-status")
        entry_box = gr.Textbox(visible="hidden", elem_id="mg-hub-entry")
        yaml_box = gr.Textbox(visible="hidden", elem_id="mg-hub-yaml")
        with gr.Accordion("Recommended models by role", open=False, elem_id="mg-hub-recommended"):
            gr.Dataframe(value=recommended_rows(service), headers=RECOMMENDED_COLUMNS, interactive=False,
                         wrap=True, elem_id="mg-hub-recommended-table")
            gr.Markdown("Pick a repository above (type it) and its file, or run `metagen models catalog` for the "
                        "exact model entries and node params of each role.")

    def search(text: str) -> tuple[Any, str]:
        try:
            found = service.hub.search(text)
        except UserError as exc:
            return gr.update(), str(exc)
        choices = [(f"{m['repo']}  ({m['downloads']} downloads)", m["repo"]) for m in found]
        return (gr.update(choices=choices, value=found[0]["repo"] if found else None),
                f"{len(found)} repositories with GGUF files." if found else "No GGUF repository matches.")

    search_btn.click(search, [query], [repo, status])
    query.submit(search, [query], [repo, status])

    def show_files(name: str | None, ctx: float | None) -> tuple[Any, Any, str]:
        if not name:
            return gr.update(), gr.update(), "Pick or type a repository first."
        try:
            found = service.hub.repo_files(name, int(ctx or 4096))
        except UserError as exc:
            return gr.update(value=[]), gr.update(choices=[], value=None), str(exc)
        best = next((r["file"] for r in found["rows"] if r["recommended"]), None)
        free = human_size(found["free_bytes"]) if found["free_bytes"] else "unknown"
        note = (f"Weights plus the KV cache at {found['n_ctx']} tokens against {free} of free {found['where']}. "
                + (f"Recommended: **{best}**." if best else "None of these fits; try a smaller context."))
        return (gr.update(value=file_rows(found)),
                gr.update(choices=[r["file"] for r in found["rows"]], value=best or found["rows"][0]["file"]), note)

    files_btn.click(show_files, [repo, n_ctx], [files, pick, status])

    def pull(name: str | None, file: str | None,
             progress: gr.Progress = gr.Progress()) -> tuple[str, str, Any]:  # noqa: B008 (how Gradio asks for it)
        if not name or not file:
            return "Pick a repository and a file first.", "", gr.update(interactive=False)

        def report(fname: str, done: int, total: int | None, rate: float) -> None:
            left = f", {((total or 0) - done) / rate:.0f}s left" if rate > 0 and total else ""
            progress((done, total) if total else None, desc=f"{fname}: {human_size(done) or '0 B'} of "
                     f"{human_size(total) or '?'} at {human_size(int(rate)) or '0 B'}/s{left}", unit="bytes")

        try:
            got = service.hub.pull(name, file, report)
        except UserError as exc:
            return str(exc), "", gr.update(interactive=False)
        how = "; ".join(f"{k}: {v}" for k, v in got["how"].items())
        return (f"Pulled **{got['file']}** ({how}). It is in the list above; **Use in editor** puts it into the "
                "open workflow as its `main` model.", json.dumps(got["entry"]), gr.update(interactive=True))

    pull_btn.click(pull, [repo, pick], [status, entry_box, use_btn])

    def cancel() -> str:
        try:
            return ("Cancelling; the partial file is kept and the next Pull continues from it."
                    if service.hub.cancel() else "No pull is running.")
        except UserError as exc:
            return str(exc)

    cancel_btn.click(cancel, None, [status])

    def use(entry_json: str, current_yaml: str) -> tuple[str, str]:
        try:
            return service.hub.use_in_workflow(current_yaml, json.loads(entry_json or "{}")), ""
        except (UserError, ValueError) as exc:
            return "", str(exc)

    use_btn.click(use, [entry_box, yaml_box], [yaml_box, status],
                  js="(entry, _y) => [entry, window.MetagenUI ? window.MetagenUI.currentYaml() : '']").then(
        None, [yaml_box], None,
        js="(text) => { if (text && window.MetagenUI) { const s = window.MetagenUI.state(); "
           "window.MetagenUI.openYaml(text, 'the workflow with the pulled model', s.origin, s.name, true); } }")
