"""The Traces tab's replay row: "Download bundle" (the run, its workflows and every model call in one file) and
"Replay" (the run again with no model, each call answered from its bundle: outputs and the replayed/model counts)."""

from __future__ import annotations

import html
import json
import logging
from dataclasses import dataclass
from typing import Any

import gradio as gr

from app.platform.scratch import ScratchFolder, scratch_file_name
from app.service.errors import UserError
from app.service.replays import replay_run, run_bundle
from app.service.studio import StudioService
from app.traces.bundle import bundle_bytes
from app.ui.endpoints import visitor_for

log = logging.getLogger(__name__)

BUNDLES = ScratchFolder("metagen-bundles", keep=8)
"""The bundles the download button serves: a private folder of at most 8, removed when the app exits."""


def bundle_file(service: StudioService, run_id: str | None, visitor: str | None) -> str | None:
    """The run's bundle written for the download button (None without a run, or one that cannot be bundled)."""
    if not run_id or not service.owns_run(run_id, visitor):
        return None
    try:
        data = bundle_bytes(run_bundle(service, run_id))
    except (UserError, LookupError) as exc:
        log.info("no bundle for run %s: %s", run_id, exc)
        return None
    except Exception:  # a trace the store cannot read back: the tab stays usable
        log.exception("bundling run %s failed", run_id)
        return None
    return str(BUNDLES.write_bytes(scratch_file_name(f"run-{run_id}", ".bundle.json.gz"), data))


def replay_html(service: StudioService, run_id: str | None, visitor: str | None) -> str:
    """The replay of a run as HTML: how it ended, the counts, and its outputs beside the recorded ones."""
    if not run_id:
        return _note("Pick a run first.")
    if service.policy.share_mode:
        return _note("Replay is for the studio's owner; download the bundle and run `metagen replay FILE`.")
    if not service.owns_run(run_id, visitor):
        return _note(f"no run {run_id!r} in the trace database")
    try:
        outcome = replay_run(service, run_id)
    except UserError as exc:
        return _note(str(exc))
    result = outcome.to_json()
    recorded = service.trace_store.get_run(run_id)["run"].get("outputs")
    same = result["outputs"] == recorded
    verdict = ("the outputs are identical to the recorded run's" if same else
               "the outputs differ from the recorded run's")
    if result["status"] != "succeeded":
        verdict = html.escape(str(result.get("error") or result["status"]))
    calls = result["calls"]
    body = json.dumps(result["outputs"], ensure_ascii=False, indent=2)
    return (f'<div id="mg-replay-result" data-replayed="{calls["replayed"]}" data-model="{calls["model"]}" '
            f'data-identical="{str(same).lower()}"><p><b>Replay {html.escape(result["status"])}</b>: '
            f'{calls["replayed"]} model calls answered from the bundle, {calls["model"]} by the model; {verdict}.</p>'
            f"<pre>{html.escape(body)}</pre></div>")


def _note(text: str) -> str:
    return f'<div class="mg-muted" id="mg-replay-result" style="padding:8px">{html.escape(text)}</div>'


@dataclass(frozen=True)
class ReplayRow:
    """The row's components (built by `replay_controls` inside the tab's layout, wired by `wire_replay`)."""

    download: gr.DownloadButton
    replay: gr.Button
    result: gr.HTML


def replay_controls() -> ReplayRow:
    """The row with "Download bundle" and "Replay" and the replay's result (call inside the tab's layout)."""
    with gr.Row():
        download = gr.DownloadButton("Download bundle", elem_id="mg-traces-bundle", scale=0)
        replay = gr.Button("Replay without the model", elem_id="mg-traces-replay", scale=0)
    return ReplayRow(download, replay, gr.HTML(elem_id="mg-traces-replay-result"))


def wire_replay(service: StudioService, run_pick: gr.Dropdown, row: ReplayRow) -> None:
    """Picking a run makes its bundle for the download button and clears the last replay; Replay replays it."""

    def fill_download(run_id: str | None, request: gr.Request = None) -> Any:  # type: ignore[assignment]
        return gr.update(value=bundle_file(service, run_id, visitor_for(service, request))), ""

    def run_replay(run_id: str | None, request: gr.Request = None) -> str:  # type: ignore[assignment]
        return replay_html(service, run_id, visitor_for(service, request))

    run_pick.change(fill_download, [run_pick], [row.download, row.result])
    row.replay.click(run_replay, [run_pick], [row.result])
