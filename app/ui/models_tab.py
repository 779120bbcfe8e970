"""The Models tab: bundled and local GGUF models with size, quantisation, context, device and CPU weights;
load/unload, making a CPU-fast copy, getting models from the Hub (get_model.py), and checking the install (the report
of `metagen doctor`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import gradio as gr

from app.service.errors import UserError
from app.service.studio import StudioService
from app.ui.get_model import get_model_section, human_size
from app.ui.remote_check import remote_check_section, remote_servers_section

log = logging.getLogger(__name__)

MODEL_COLUMNS = ["name", "source", "size", "quant", "context", "arch", "prompts", "device", "loaded", "path",
                 "CPU weights", "speculation"]
"""Short headers: the long ones wrapped mid-word ('quant isati on') in the narrow columns."""


def model_rows(service: StudioService) -> tuple[list[list[Any]], list[tuple[str, str]]]:
    entries = service.models.entries()
    rows = [[e["name"], e["source"], human_size(e["size_bytes"]), e["quantization"], e["context_length"],
             e["architecture"], prompts_label(e.get("prompt_format")), e["device"], "yes" if e["loaded"] else "no",
             e["path"], e.get("weights", ""),
             e.get("speculative", "")]
            for e in entries]
    choices = [(f"{e['name']} ({e['source']})", e["key"]) for e in entries]
    return rows, choices


PROMPT_LABELS = {"template": "own template", "architecture": "{name} turns", "base model": "plain text (base)",
                 "fallback": "ChatML (guessed)"}


def prompts_label(prompt_format: dict[str, str] | None) -> str:
    """How chat messages reach the model, in a few words (its full sentence is in `models list --json`)."""
    if not prompt_format:
        return ""
    return PROMPT_LABELS.get(prompt_format.get("source", ""), "").format(name=prompt_format.get("name", ""))


def blank_if_none(value: int | None) -> str:
    """A remembered number as form text ('' for unset, so the field shows its placeholder)."""
    return "" if value is None else str(value)


def device_form_values(device: str | None, threads: str | None, layers: str | None) -> dict[str, Any]:
    """The device form's text fields as settings values (blank = unset; the settings check the numbers)."""
    def clean(text: str | None) -> str | None:
        text = (text or "").strip()
        return text or None

    return {"device": device or "auto", "threads": clean(threads), "n_gpu_layers": clean(layers)}


def build_summary() -> str:
    """Which llama.cpp build runs here (CPU / CUDA / Vulkan / Metal) and its devices."""
    from app.service.local_models import build_line

    return build_line()


def models_tab(service: StudioService, tab: gr.Tab) -> None:
    """The Models tab: the local models (load, unload, CPU copy, add), device settings, Get a model, remote
    servers; each section builds its components and wires its own events."""
    gr.Markdown(build_summary(), elem_id="mg-models-build")
    views = _model_list_views(service)
    refresh_list = _wire_model_list(service, views, tab)
    _device_section(service, views["outputs"], refresh_list)
    get_model_section(service, refresh_list, views["outputs"])
    remote_check_section(service)
    remote_servers_section(service)
    install_check_section(service)


def install_check_report(service: StudioService) -> str:
    """`metagen doctor`'s report as markdown (what the button shows)."""
    try:
        return service.check_install().to_markdown()
    except UserError as exc:
        return str(exc)
    except Exception as exc:
        log.exception("checking the install failed")
        return f"Could not check the install: {exc}"


def install_check_section(service: StudioService) -> None:
    """Check this install (owner only): the checks of `metagen doctor`, with what to fix."""
    with gr.Group(visible=not service.policy.share_mode):
        gr.Markdown("**Check this install**: Python and packages, the llama.cpp build against this CPU, a canary "
                    "decode, the models folder, disk space, code isolation, Chromium, Hub settings and the trace "
                    "database (the same as `metagen doctor`).")
        button = gr.Button("Check this install", elem_id="mg-models-doctor", scale=0)
        report = gr.Markdown(elem_id="mg-models-doctor-report")
    button.click(lambda: install_check_report(service), [], [report])


def _model_list_views(service: StudioService) -> dict[str, Any]:
    table = gr.Dataframe(headers=MODEL_COLUMNS, interactive=False, elem_id="mg-models-table", wrap=True)
    with gr.Row():
        pick = gr.Dropdown([], label="Model", elem_id="mg-models-pick", scale=3)
        load_btn = gr.Button("Load", elem_id="mg-models-load", scale=0)
        unload_btn = gr.Button("Unload", elem_id="mg-models-unload", scale=0)
        copy_btn = gr.Button("Make CPU-fast copy", elem_id="mg-models-cpu-copy", scale=0,
                             visible=not service.policy.share_mode)
        refresh = gr.Button("Refresh", elem_id="mg-models-refresh", scale=0)
    with gr.Row(visible=not service.policy.share_mode):
        add_path = gr.Textbox(label="Add a GGUF file by path", placeholder="/path/to/model.gguf",
                              elem_id="mg-models-path", scale=3)
        add_btn = gr.Button("Add", elem_id="mg-models-add", scale=0)
    return {"table": table, "pick": pick, "load": load_btn, "unload": unload_btn, "copy": copy_btn,
            "refresh": refresh, "add_path": add_path, "add": add_btn}


def _wire_model_list(service: StudioService, v: dict[str, Any], tab: gr.Tab) -> Callable[..., tuple[Any, Any, str]]:
    """The list's events; returns its refresh (the device section reports through it)."""
    message = gr.Markdown(elem_id="mg-models-message")
    folder = "the owner's models folder" if service.share_mode else f"`{service.models_dir}`"
    gr.Markdown(f"Models folder: {folder} — drop .gguf files there, then Refresh. "
                "**Make CPU-fast copy** writes a Q8_0 copy of the picked model (for types such as Q4_1 that "
                "llama.cpp has no fast CPU matrix path for) and measures it against the original here; a model "
                "with `cpu_weights: auto` then runs the copy only if it was faster with quality held.")
    table, pick = v["table"], v["pick"]

    def refresh_list(current: str | None = None, note: str = "") -> tuple[Any, Any, str]:
        try:
            rows, choices = model_rows(service)
        except Exception as exc:
            log.exception("listing models failed")
            return gr.update(), gr.update(), f"Cannot list the models: {exc}"
        keys = [k for _, k in choices]
        value = current if current in keys else (keys[0] if keys else None)
        return gr.update(value=rows), gr.update(choices=choices, value=value), note

    outputs = [table, pick, message]
    v["outputs"] = outputs
    tab.select(lambda current: refresh_list(current), [pick], outputs)
    v["refresh"].click(lambda current: refresh_list(current), [pick], outputs)

    def act(kind: str, key: str | None) -> tuple[Any, Any, str]:
        if not key:
            return refresh_list(None, "Pick a model first.")
        try:
            if kind == "load":
                service.models.load(key)
                note = "Loaded."
            elif kind == "copy":
                note = service.models.make_cpu_copy(key)
            else:
                note = "Unloaded." if service.models.unload(key) else "That model was not loaded."
        except UserError as exc:
            note = str(exc)
        except Exception as exc:
            log.exception("%s failed", kind)
            note = f"Could not {kind} the model: {exc}"
        return refresh_list(key, note)

    v["load"].click(lambda key: act("load", key), [pick], outputs)
    v["unload"].click(lambda key: act("unload", key), [pick], outputs)
    v["copy"].click(lambda key: act("copy", key), [pick], outputs)

    def add(path: str) -> tuple[Any, Any, str]:
        try:
            added = service.models.add(path)
        except UserError as exc:
            return refresh_list(None, str(exc))
        return refresh_list(added, f"Added {added}.")

    v["add"].click(add, [v["add_path"]], outputs)
    return refresh_list


def _device_section(service: StudioService, outputs: list[Any], refresh_list: Callable[..., Any]) -> None:
    """Device settings new models load with (owner only)."""
    current = service.models.device_settings()
    with gr.Row(visible=not service.policy.share_mode):
        device = gr.Dropdown(["auto", "cpu", "gpu", "metal"], value=current["device"], label="Device",
                             info="auto: offload to the GPU when this llama.cpp build can", elem_id="mg-models-device")
        # Textboxes, not gr.Number: a Number shows an unset value as 0, which is not a valid thread count and
        # means "no offload" for GPU layers, so saving the untouched form used to fail or turn the GPU off.
        threads = gr.Textbox(value=blank_if_none(current["threads"]), label="CPU threads",
                             placeholder="automatic", info="empty: llama.cpp chooses", elem_id="mg-models-threads")
        layers = gr.Textbox(value=blank_if_none(current["n_gpu_layers"]), label="GPU layers",
                            placeholder="device default", info="-1 all, 0 none, empty: the device's default",
                            elem_id="mg-models-layers")
        save_device = gr.Button("Save device settings", elem_id="mg-models-save-device", scale=0)

    def save_settings(device_value: str, threads_value: str | None, layers_value: str | None) -> tuple[Any, ...]:
        try:
            service.models.save_device_settings(device_form_values(device_value, threads_value, layers_value))
        except UserError as exc:
            return refresh_list(None, str(exc))
        return refresh_list(None, "Saved; models load with these settings from now on (unload a loaded model "
                                  "to apply them to it).")

    save_device.click(save_settings, [device, threads, layers], outputs)
