"""Every reply reaches its caller (issue 44, finding 3), on the real bundled model with faults planted in the worker
(tests/backends/worker_faults.py): an answer the worker cannot pickle (a lock, a local function) or the studio
cannot unpickle is that caller's error within a second, while a generation in flight goes on."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterator

import pytest

from backends.base import BackendError, ModelSpec, SamplingParams
from backends.llama.models.bundled import bundled_model_path
from backends.llama.worker_backend import WorkerBackend
from tests.backends import worker_faults
from tests.backends.liveness_helpers import AT_ONCE_S, LOAD_S, Outcome

pytestmark = pytest.mark.model


def plant_faults(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers started from now on run worker_faults.install() first (wherever the studio keeps their program)."""
    for name in ("backends.llama.worker_process", "backends.llama.worker_backend"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "WORKER_CODE"):
            monkeypatch.setattr(module, "WORKER_CODE", worker_faults.worker_code(module.WORKER_CODE))


@pytest.fixture
def faulty(monkeypatch: pytest.MonkeyPatch) -> Iterator[WorkerBackend]:
    plant_faults(monkeypatch)
    backend = WorkerBackend(bundled_model_path(), ModelSpec(device="cpu", n_ctx=512))
    yield backend
    backend.close()


@pytest.mark.parametrize(("answer", "says"), [
    ("lock", "could not cross to the studio"),
    ("local", "could not cross to the studio"),
    ("alien", "could not be read in the studio"),
], ids=["a lock", "a local function", "a class the studio lacks"])
def test_an_answer_that_cannot_cross_is_its_callers_error_and_others_go_on(
        faulty: WorkerBackend, answer: str, says: str) -> None:
    started = threading.Event()
    pieces: list[str] = []

    def on_token(_index: int, text: str) -> None:
        pieces.append(text)
        started.set()

    other = Outcome(lambda: faulty.generate("Count from one to fifty:", SamplingParams(max_tokens=12),
                                            on_token=on_token))
    assert started.wait(LOAD_S)
    bad = Outcome(lambda: faulty.tokenize(answer)).within(AT_ONCE_S, f"tokenize answering {answer}")
    assert isinstance(bad.error, BackendError), bad.error
    assert says in str(bad.error)
    other.within(LOAD_S, "the generation in flight")
    assert other.error is None, other.error
    assert other.value.completions[0].text == "".join(pieces)
    assert faulty.tokenize("hello"), "the worker serves on"
    errors: list[BaseException] = []
    for _ in range(2):
        try:
            faulty.tokenize(answer)
        except BackendError as exc:
            errors.append(exc)
    assert len(errors) == 2 and errors[0] is not errors[1], "each failed request raises its own object"
