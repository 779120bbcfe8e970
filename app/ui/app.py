"""The Gradio app of `metagen ui`: editor page, Traces, Evaluate, Tune and Models tabs around one StudioService."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import gradio as gr
from starlette.middleware import Middleware

from app.platform.resources import static_dir
from app.platform.scratch import ScratchFolder, remove_stale
from app.serve.config import ServeConfig, studio_config
from app.serve.origin_guard import OriginGuard
from app.serve.routes import api_routes
from app.service.studio import StudioService
from app.ui.app_links import app_link_middleware
from app.ui.app_page import mount_app_page
from app.ui.assets import asset_tags
from app.ui.editor_page import editor_page
from app.ui.evaluate_tab import evaluate_tab
from app.ui.models_tab import models_tab
from app.ui.share_links import share_links_component, wire_run_links
from app.ui.traces_tab import traces_tab
from app.ui.tune_tab import TUNE_TAB, tune_tab
from app.viz.tune_race import TUNE_CSS

APP_TITLE = "Metagen Studio"
STATIC_FILES = ("editor.css", "ui.css", "connection.js", "editor.js", "run_outputs.js", "run_panel.js",
                "gallery.js", "history_panel.js", "ui_bridge.js", "subworkflow_ui.js", "plot_resize.js")
"""Loaded in this order into the page head (the editor before the bridge that mounts it). editor.js loads the
editor's ES modules (static/editor/) with its own ?v= version; ui_bridge.js waits for them before mounting."""

EDITOR_TAB, TRACES_TAB, EVALUATE_TAB, MODELS_TAB = "editor", "traces", "evaluate", "models"

APP_CSS = """
footer { display: none !important; }
/* no page navbar: the studio and its app page (/app, app_page.py) link to each other themselves (Gradio 6.31 draws
   it even beside gr.Navbar(visible=False)) */
.nav-holder { display: none !important; }
.gradio-container { max-width: 100% !important; }
#mg-banner { font-size: 13px; }
/* table headers stay one line ("context", never "conte xt" in a 220 px tall header row) */
#mg-models-table th, #mg-models-table th *, #mg-hub-table th, #mg-hub-table th *,
#mg-hub-recommended-table th, #mg-hub-recommended-table th * { white-space: nowrap !important; word-break: keep-all; }
""" + TUNE_CSS


GRADIO_CACHE_CLEANUP = (900, 3600)
"""Every 15 minutes Gradio deletes the files it copied for this app (downloads, uploads) that are over an hour old."""


GRADIO_FILES_PREFIX = "metagen-gradio"
_gradio_files: ScratchFolder | None = None


def own_gradio_cache() -> Path:
    """Give this app instance a Gradio cache folder of its own (Gradio's default, <tmp>/gradio, is shared by every
    instance on the machine, so one could serve a file another made): a scratch folder removed at exit and on a
    stopping signal, inside $GRADIO_TEMP_DIR when the owner set one. Folders left by killed instances are removed."""
    global _gradio_files
    if _gradio_files is None:
        given = os.environ.get("GRADIO_TEMP_DIR")
        parent = Path(given).expanduser() if given else None
        remove_stale(GRADIO_FILES_PREFIX, parent)
        _gradio_files = ScratchFolder(GRADIO_FILES_PREFIX, keep=None, parent=parent)
    folder = _gradio_files.folder
    os.environ["GRADIO_TEMP_DIR"] = str(folder)  # read by Gradio whenever a block or the server app is made
    return folder


def static_head() -> str:
    """<link>/<script> tags for the editor page's JS and CSS (served from static/, never a CDN)."""
    return asset_tags(STATIC_FILES)


def build_app(service: StudioService) -> gr.Blocks:
    """The whole UI; every request goes through `service`, whose policy (local or share mode) was fixed
    when it was built, together with its scheduler and run queue."""
    own_gradio_cache()
    gr.set_static_paths([static_dir()])
    with gr.Blocks(title=APP_TITLE, analytics_enabled=False, fill_width=True,
                   delete_cache=GRADIO_CACHE_CLEANUP) as demo:
        banner = service.policy.describe() + (" · dry run (fake model)" if service.dry_run else "")
        gr.Markdown(f"**{APP_TITLE}** · {banner}", elem_id="mg-banner")
        with gr.Tabs(selected=EDITOR_TAB) as tabs:
            with gr.Tab("Editor", id=EDITOR_TAB, elem_id="mg-tab-editor"):
                editor_page(service, static_head())
                share_links_component(service)
            with gr.Tab("Traces", id=TRACES_TAB, elem_id="mg-tab-traces") as traces:
                traces_view = traces_tab(service, tabs, traces)
            with gr.Tab("Evaluate", id=EVALUATE_TAB, elem_id="mg-tab-evaluate") as evaluate:
                evaluate_tab(service, tabs, evaluate)
            if not service.share_mode:  # tuning runs many evaluations: the owner's only
                with gr.Tab("Tune", id=TUNE_TAB, elem_id="mg-tab-tune") as tune:
                    tune_tab(service, tabs, tune)
            with gr.Tab("Models", id=MODELS_TAB, elem_id="mg-tab-models") as models:
                models_tab(service, models)
        wire_run_links(demo, service, tabs, traces_view)
    mount_app_page(demo, service)
    demo.queue(default_concurrency_limit=4)
    return demo


def drop_gradio_cors(server_app: Any) -> None:
    """Take Gradio's own CORS middleware out of a launched app: it reflects any localhost origin (and any origin
    to a Host that is not localhost), and it sits outside the origin guard, so it answered preflights and marked
    refusals readable. The guard answers CORS for `--allowed-origins` only. Starlette builds the middleware stack
    on a request, so the next request gets the stack without it (the guard is in both)."""
    from gradio.route_utils import CustomCORSMiddleware

    middleware = getattr(server_app, "user_middleware", None)
    if middleware is None:
        return
    kept = [m for m in middleware if m.cls is not CustomCORSMiddleware]
    if len(kept) != len(middleware):
        middleware[:] = kept
        server_app.middleware_stack = None


def launch_kwargs(service: StudioService, api: ServeConfig | None = None) -> dict[str, Any]:
    """Arguments for `Blocks.launch` that every launcher (CLI, desktop) must pass. The OpenAI-compatible /v1
    routes (app.serve) go in front of Gradio's own routes on the same server: FastAPI's `routes` argument, passed
    through Gradio's `app_kwargs`, is where the app Gradio creates starts its route list. In share mode
    Gradio's traffic monitoring (`/monitoring`, `/monitoring/summary`, open to anyone by default) is off. Every
    request, Gradio's own routes included, meets the origin guard first (Host, Origin, JSON bodies: `api.origins`)."""
    api = api or studio_config(service)
    return {
        "app_kwargs": {"routes": api_routes(service, api),
                       "middleware": [Middleware(OriginGuard, rules=api.origins),
                                      *app_link_middleware(service.policy.share_mode)]},  # ?app= -> the app page
        "theme": gr.themes.Default(),
        "css": APP_CSS,
        "allowed_paths": [str(static_dir())],
        "auth": service.policy.gradio_auth(),
        "footer_links": [],
        "ssr_mode": False,
        "enable_monitoring": False if service.policy.share_mode else None,
        "max_file_size": service.policy.max_upload_bytes,  # share mode: /gradio_api/upload refuses larger files
    }
