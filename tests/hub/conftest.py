"""Fixtures of the pull tests: a fake Hub on HF_ENDPOINT (offline mode lifted, an empty HF cache) and tiny GGUFs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.backends.rank_gguf import write_rank_gguf
from tests.fake_hub import FakeHub

TINY_REPO = "tester/Tiny-GGUF"


def tiny_gguf(path: Path, seed: int = 0) -> bytes:
    write_rank_gguf(path, seed=seed)
    return path.read_bytes()


@pytest.fixture
def fake_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    """A fake Hub with `tester/Tiny-GGUF` (Q4_K_M and Q8_0 files, a README) and a repo without GGUFs."""
    hub = FakeHub()
    made = tmp_path / "made"
    made.mkdir()
    hub.add(TINY_REPO, {"tiny-Q4_K_M.gguf": tiny_gguf(made / "a.gguf", 1),
                        "tiny-Q8_0.gguf": tiny_gguf(made / "b.gguf", 2), "README.md": b"# tiny\n"})
    hub.add("tester/no-gguf", {"model.safetensors": b"x" * 100})
    hub.start()
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("METAGEN_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    try:
        yield hub
    finally:
        hub.stop()
