"""The model pool's memory budget on stub backends: LRU unloading before a load, refusal when all are busy."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from backends.base import BackendError, ModelSpec
from backends.pool import MIN_DEFAULT_BUDGET, POOL_MEMORY_ENV, ModelPool, default_memory_budget

MB = 1_000_000


class StubBackend:
    """Stands in for LlamaBackend: a fixed memory size, a busy flag, a close count."""

    def __init__(self, path: Path, spec: ModelSpec, device: dict[str, Any]) -> None:
        self.path, self.spec, self.device = path, spec, device
        self.model_id = f"{path.name}@{spec.n_ctx}"
        self.busy = False
        self.closed = False
        self.file_info = type("Info", (), {"name": path.name})()

    def memory_bytes(self) -> int:
        return self.path.stat().st_size + self.spec.n_ctx * 1000  # weights + a KV cache growing with n_ctx

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "m.gguf"
    path.write_bytes(b"\0" * (40 * MB))
    return path


def _spec(path: Path, n_ctx: int) -> ModelSpec:
    return ModelSpec(source="path", path=str(path), device="cpu", n_ctx=n_ctx)


def test_new_n_ctx_unloads_the_least_recently_used_idle_copy(model_file: Path) -> None:
    pool = ModelPool(memory_budget_bytes=100 * MB, loader=StubBackend)
    first = pool.get(_spec(model_file, 1024))   # 41 MB
    second = pool.get(_spec(model_file, 2048))  # 42 MB: both fit
    assert len(pool.loaded()) == 2
    pool.get(_spec(model_file, 1024))           # first is now the most recently used
    third = pool.get(_spec(model_file, 4096))   # 44 MB: second (LRU) goes before it loads
    assert second.closed and not first.closed and not third.closed
    assert [e["model"] for e in pool.loaded()] == [first.model_id, third.model_id]
    assert pool.total_bytes() <= pool.memory_budget_bytes


def test_a_model_that_cannot_fit_beside_busy_ones_is_refused(model_file: Path) -> None:
    pool = ModelPool(memory_budget_bytes=90 * MB, loader=StubBackend)
    a = pool.get(_spec(model_file, 1024))
    b = pool.get(_spec(model_file, 2048))
    a.busy = b.busy = True
    with pytest.raises(BackendError, match=f"Not enough model memory.*{POOL_MEMORY_ENV}"):
        pool.get(_spec(model_file, 4096))
    assert not a.closed and not b.closed and len(pool.loaded()) == 2
    b.busy = False
    pool.get(_spec(model_file, 4096))
    assert b.closed and not a.closed


def test_default_budget_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(POOL_MEMORY_ENV, "3G")
    assert default_memory_budget() == 3 * 1024**3
    assert ModelPool(loader=StubBackend).memory_budget_bytes == 3 * 1024**3
    monkeypatch.setenv(POOL_MEMORY_ENV, "lots")
    assert default_memory_budget() >= MIN_DEFAULT_BUDGET
    monkeypatch.delenv(POOL_MEMORY_ENV)
    assert default_memory_budget() >= MIN_DEFAULT_BUDGET


def test_the_pool_hands_the_loader_the_draft_models_file(model_file: Path, tmp_path: Path) -> None:
    """A `speculative: {method: draft}` entry: the loader gets the draft as a path (its weights chosen by the pool;
    cpu_weights: original keeps the file itself)."""
    from backends.base import SpeculativeSpec

    draft_file = tmp_path / "d.gguf"
    draft_file.write_bytes(b"\0" * MB)
    draft = ModelSpec(source="path", path=str(draft_file), device="cpu", cpu_weights="original")
    spec = ModelSpec(source="path", path=str(model_file), device="cpu", n_ctx=1024,
                     speculative=SpeculativeSpec(method="draft", draft=draft, draft_alias="d"))
    pool = ModelPool(memory_budget_bytes=100 * MB, loader=StubBackend)
    backend = pool.get(spec)
    loaded = backend.spec.speculative.draft
    assert loaded.source == "path" and Path(loaded.path) == draft_file.resolve()
    assert backend.spec.path == spec.path


def test_a_slow_close_does_not_hold_up_other_models_gets(model_file: Path) -> None:
    """Closing a worker may take seconds (it is asked to stop, then killed): the pool's lock is not held meanwhile,
    so a `get` of another, loaded model returns while the close is still going on."""
    release = threading.Event()
    closing = threading.Event()

    class SlowClose(StubBackend):
        def close(self) -> None:
            closing.set()
            release.wait(30)
            super().close()

    pool = ModelPool(memory_budget_bytes=100 * MB, loader=SlowClose)
    slow = pool.get(_spec(model_file, 1024))
    other = pool.get(_spec(model_file, 2048))
    unloading = threading.Thread(target=pool.unload, args=(slow.model_id,))
    unloading.start()
    assert closing.wait(10)
    got: list[Any] = []
    getter = threading.Thread(target=lambda: got.append(pool.get(_spec(model_file, 2048))))
    getter.start()
    getter.join(10)
    try:
        assert got == [other], "get waited for another model's close"
        assert not slow.closed and [e["model"] for e in pool.loaded()] == [other.model_id]
    finally:
        release.set()
        unloading.join(10)
    assert slow.closed and not other.closed
