"""Static asset tags for the UI: URLs of files in static/ with a cache-busting version, built once per app."""

from __future__ import annotations

from pathlib import Path

from app.platform.resources import static_dir


def asset_version(path: Path) -> int:
    """The cache-busting version of a static file: its mtime, or for a script with a folder of ES modules
    beside it of the same name (editor.js + editor/), the newest mtime of the script and those modules.
    Such a script passes its own ?v= query on to the modules it imports (and they to theirs), so the
    browser fetches every module again once any of them changes."""
    mtimes = [path.stat().st_mtime]
    modules = path.with_suffix("")
    if path.suffix == ".js" and modules.is_dir():
        mtimes.extend(module.stat().st_mtime for module in modules.rglob("*.js"))
    return int(max(mtimes))


def static_url(path: Path) -> str:
    """URL of a static file served by Gradio (relative, so a proxy prefix keeps working); the version
    (asset_version) busts browser caches after an update."""
    return f"gradio_api/file={path.as_posix()}?v={asset_version(path)}"


def asset_tags(names: tuple[str, ...]) -> str:
    """<link>/<script> tags for files of static/, in the given order (missing files are skipped). Scripts
    are classic <script src> tags: gr.HTML's `head` re-creates each script with only its src and async (a
    type="module" would be dropped), so ES modules are loaded by a classic loader (static/editor.js)."""
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
