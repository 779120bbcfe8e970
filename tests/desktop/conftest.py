"""Fixtures for desktop tests: a virtual X display (Xvfb) whose framebuffer we can screenshot."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass
class VirtualDisplay:
    name: str
    fbdir: Path

    def screenshot(self, target: Path) -> Path:
        """Save the whole screen as PNG (Xvfb keeps it in an XWD file when started with -fbdir)."""
        from PIL import Image

        data = (self.fbdir / "Xvfb_screen0").read_bytes()
        header = struct.unpack(">25I", data[:100])
        header_size, width, height = header[0], header[4], header[5]
        byte_order, bits_per_pixel, bytes_per_line, ncolors = header[7], header[11], header[12], header[19]
        if bits_per_pixel != 32:
            raise RuntimeError(f"unexpected Xvfb depth: {bits_per_pixel} bits per pixel")
        start = header_size + ncolors * 12
        raw = data[start:start + bytes_per_line * height]
        image = Image.frombuffer("RGB", (width, height), raw, "raw", "BGRX" if byte_order == 0 else "XRGB",
                                 bytes_per_line, 1)
        target.parent.mkdir(parents=True, exist_ok=True)
        image.save(target)
        return target


def _free_display() -> int:
    for number in range(90, 140):
        if not Path(f"/tmp/.X11-unix/X{number}").exists() and not Path(f"/tmp/.X{number}-lock").exists():
            return number
    raise RuntimeError("no free X display number")


@pytest.fixture
def xvfb(tmp_path: Path) -> Iterator[VirtualDisplay]:
    """A private Xvfb server; skipped (with the reason) only when Xvfb is not installed."""
    binary = shutil.which("Xvfb")
    if binary is None:
        pytest.skip("Xvfb is not installed (apt-get install xvfb); CI installs it, so this runs there")
    number = _free_display()
    fbdir = tmp_path / "fb"
    fbdir.mkdir()
    proc = subprocess.Popen([binary, f":{number}", "-screen", "0", "1400x900x24", "-fbdir", str(fbdir),
                             "-nolisten", "tcp"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for _ in range(100):
        if Path(f"/tmp/.X11-unix/X{number}").exists() or proc.poll() is not None:
            break
        time.sleep(0.05)
    if proc.poll() is not None:
        raise RuntimeError(f"Xvfb failed to start: {proc.stderr.read().decode(errors='replace')}")
    try:
        yield VirtualDisplay(name=f":{number}", fbdir=fbdir)
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def desktop_env(tmp_path: Path) -> dict[str, str]:
    """Environment for a `metagen desktop` child process with its own data folder and no display."""
    env = {k: v for k, v in os.environ.items() if k not in {"DISPLAY", "WAYLAND_DISPLAY", "METAGEN_WORKFLOWS",
                                                              "METAGEN_MODELS", "METAGEN_TRACE_DB"}}
    env["METAGEN_HOME"] = str(tmp_path / "home")
    env["BROWSER"] = "true"  # never open a real browser from a test
    return env
