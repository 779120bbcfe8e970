"""`metagen ui --app NAME`: a Gradio app serving the app page of one workflow alone (no studio beside it)."""

from __future__ import annotations

from typing import Any

import gradio as gr

from app.platform.resources import static_dir
from app.serve.config import ServeConfig
from app.service.studio import StudioService
from app.ui.app import GRADIO_CACHE_CLEANUP, launch_kwargs, own_gradio_cache
from app.ui.app_page import APP_PAGE_TITLE, app_page
from app.ui.app_target import named_target


def build_app_page(service: StudioService, name: str) -> gr.Blocks:
    """The one page for workflow `name` (a saved workflow, else an example); UserError when there is none, before
    anything is served."""
    target = named_target(service, name)
    own_gradio_cache()
    gr.set_static_paths([static_dir()])
    with gr.Blocks(title=f"{target.workflow.name} · {APP_PAGE_TITLE}", analytics_enabled=False,
                   delete_cache=GRADIO_CACHE_CLEANUP) as demo:
        app_page(service, fixed=target.name)
    demo.queue(default_concurrency_limit=4)
    return demo


def alone_launch_kwargs(service: StudioService, api: ServeConfig | None = None) -> dict[str, Any]:
    """The studio's launch arguments without its app-link redirect (this app's main page is the app page)."""
    kwargs = launch_kwargs(service, api)
    kwargs["app_kwargs"] = {k: v for k, v in kwargs["app_kwargs"].items() if k != "middleware"}
    return kwargs
