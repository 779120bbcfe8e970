"""A stopped engine worker is the server's error on /v1: an OpenAI-shaped 500 with its message, not the caller's 400."""

from __future__ import annotations

from app.serve.failures import backend_error
from backends.base import BackendError, EngineStoppedError, ModelBrokenError

STOPPED = ("the llama.cpp engine for Qwen3-0.6B-Q4_K_M.gguf stopped (SIGSEGV); it restarts on the next request")


def test_a_stopped_engine_is_a_500_with_its_message() -> None:
    error = backend_error(EngineStoppedError(STOPPED))
    assert error.status == 500
    assert error.body() == {"error": {"message": STOPPED, "type": "server_error", "param": None,
                                      "code": "engine_stopped"}}


def test_a_broken_model_is_a_500_and_a_bad_request_stays_a_400() -> None:
    broken = backend_error(ModelBrokenError(f"Qwen3-0.6B-Q4_K_M.gguf is marked broken: {STOPPED}"))
    assert broken.status == 500 and broken.code == "engine_stopped"
    assert backend_error(BackendError("n=99 samples exceed the engine's 64 parallel sequences")).status == 400
