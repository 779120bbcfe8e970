"""The Models tab's "Get a model" section: search the Hub, a repo's GGUFs with whether each fits this machine and
the recommended quant, Pull with progress and Cancel, "Use in editor", and the catalog's recommendations.
Not built on a shared app (the service refuses it too)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
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


def fits_here(entry: dict[str, Any]) -> str:
    """Whether a catalog model's weights fit this machine's free memory now ('yes' / 'no' / 'unknown')."""
    fits = entry.get("fits_here")
    where = entry.get("memory_where") or "memory"
    return "unknown" if fits is None else f"yes ({where})" if fits else f"no ({where})"


def recommended_rows(service: StudioService) -> list[list[Any]]:
    return [[e["role"], e["name"], fits_here(e), f"{e['size_gb']:.2f} GB", e["repo"], e["file"], e.get("notes", "")]
            for e in service.hub.recommended()]


def get_model_section(service: StudioService, refresh_list: Callable[..., Any] | None = None,
                      list_outputs: list[Any] | None = None) -> None:
    """Build the section inside the current Blocks context; nothing on a shared app. After a pull the Models
    tab's list (`list_outputs`, refreshed by `refresh_list`) shows the new file."""
    if service.policy.share_mode:
        return
    with gr.Accordion("Get a model (Hugging Face Hub)", open=False, elem_id="mg-get-model"):
        v = _section_views(service)
    _wire_search(service, v)
    _wire_pull(service, v, refresh_list, list_outputs)
    _wire_recommended(v)
    _wire_use(service, v)


def _section_views(service: StudioService) -> dict[str, Any]:
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
        pick = gr.Dropdown([], label="File to pull", allow_custom_value=True, elem_id="mg-hub-pick", scale=3)
        pull_btn = gr.Button("Pull", variant="primary", elem_id="mg-hub-pull", scale=0)
        cancel_btn = gr.Button("Cancel", elem_id="mg-hub-cancel", scale=0)
        use_btn = gr.Button("Use in editor", elem_id="mg-hub-use", scale=0, interactive=False)
    status = gr.Markdown(elem_id="mg-hub-status")
    entry_box = gr.Textbox(visible="hidden", elem_id="mg-hub-entry")
    yaml_box = gr.Textbox(visible="hidden", elem_id="mg-hub-yaml")
    with gr.Accordion("Recommended models by role", open=False, elem_id="mg-hub-recommended"):
        rows = recommended_rows(service)
        recommended = gr.Dataframe(value=rows, headers=RECOMMENDED_COLUMNS, interactive=False, wrap=True,
                                   elem_id="mg-hub-recommended-table")
        gr.Markdown("Click a row to fill the repository and file above, then **Pull**. `metagen models catalog` "
                    "prints the exact model entries and node params of each role.")
    return {"query": query, "search": search_btn, "repo": repo, "n_ctx": n_ctx, "files_btn": files_btn,
            "files": files, "pick": pick, "pull": pull_btn, "cancel": cancel_btn, "use": use_btn, "status": status,
            "entry": entry_box, "yaml": yaml_box, "recommended": recommended, "recommended_rows": rows}


def _wire_search(service: StudioService, v: dict[str, Any]) -> None:
    def search(text: str) -> tuple[Any, str]:
        try:
            found = service.hub.search(text)
        except UserError as exc:
            return gr.update(), str(exc)
        choices = [(f"{m['repo']}  ({m['downloads']} downloads)", m["repo"]) for m in found]
        return (gr.update(choices=choices, value=found[0]["repo"] if found else None),
                f"{len(found)} repositories with GGUF files." if found else "No GGUF repository matches.")

    v["search"].click(search, [v["query"]], [v["repo"], v["status"]])
    v["query"].submit(search, [v["query"]], [v["repo"], v["status"]])

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

    v["files_btn"].click(show_files, [v["repo"], v["n_ctx"]], [v["files"], v["pick"], v["status"]])


def _wire_recommended(v: dict[str, Any]) -> None:
    """Clicking a Recommended row fills the repository and the file: one more click pulls it."""
    rows = v["recommended_rows"]

    def choose(event: gr.SelectData) -> tuple[Any, Any, str]:
        index = event.index[0] if isinstance(event.index, (list, tuple)) else event.index
        if not isinstance(index, int) or not 0 <= index < len(rows):
            return gr.update(), gr.update(), ""
        row = dict(zip(RECOMMENDED_COLUMNS, rows[index], strict=False))
        return (gr.update(choices=[row["repo"]], value=row["repo"]),
                gr.update(choices=[row["file"]], value=row["file"]),
                f"Picked **{row['model']}** ({row['size']}, fits this machine: {row['fits']}): press **Pull**.")

    v["recommended"].select(choose, None, [v["repo"], v["pick"], v["status"]])


def _wire_pull(service: StudioService, v: dict[str, Any], refresh_list: Callable[..., Any] | None,
               list_outputs: list[Any] | None) -> None:
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

    # the old status is cleared first, so the progress bar is never drawn over the last pull's message
    pulled = v["pull"].click(lambda: "", None, [v["status"]]).then(
        pull, [v["repo"], v["pick"]], [v["status"], v["entry"], v["use"]])
    if refresh_list is not None and list_outputs:
        pulled.then(lambda: refresh_list(None)[:2], None, list_outputs[:2])

    def cancel() -> str:
        try:
            return ("Cancelling; the partial file is kept and the next Pull continues from it."
                    if service.hub.cancel() else "No pull is running.")
        except UserError as exc:
            return str(exc)

    v["cancel"].click(cancel, None, [v["status"]])


def _wire_use(service: StudioService, v: dict[str, Any]) -> None:
    def use(entry_json: str, current_yaml: str) -> tuple[str, str]:
        try:
            return service.hub.use_in_workflow(current_yaml, json.loads(entry_json or "{}")), ""
        except (UserError, ValueError) as exc:
            return "", str(exc)

    v["use"].click(use, [v["entry"], v["yaml"]], [v["yaml"], v["status"]],
                   js="(entry, _y) => [entry, window.MetagenUI ? window.MetagenUI.currentYaml() : '']").then(
        None, [v["yaml"]], None,
        js="(text) => { if (text && window.MetagenUI) { const s = window.MetagenUI.state(); "
           "window.MetagenUI.openYaml(text, 'the workflow with the pulled model', s.origin, s.name, true); } }")
