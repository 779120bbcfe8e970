"""Static asset tags for the UI: URLs of files in static/ with a cache-busting version, built once per app."""

from __future__ import annotations

from pathlib import Path

from app.platform.resources import static_dir


def static_url(path: Path) -> str:
    """URL of a static file served by Gradio (relative, so a proxy prefix keeps working); the mtime
    busts browser caches after an update."""
    return f"gradio_api/file={path.as_posix()}?v={int(path.stat().st_mtime)}"


def asset_tags(names: tuple[str, ...]) -> str:
    """<link>/<script> tags for files of static/, in the given order (missing files are skipped)."""
    folder = static_dir()
    tags = []
    for name in names:
        path = folder / name
        if not path.is_file():
            continue
        if name.endswith(".css"):
            tags.append(f'<link rel="stylesheet" href="{static_url(path)}">')
        else:
            tags.append(f'<script src="{static_url(path)}"></script>')
    return "\n".join(tags)
