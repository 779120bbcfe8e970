"""The model pool and device resolution: sharing, unloading, the memory budget and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from backends.base import BackendError, LLMBackend, ModelFileError, ModelSpec
from backends.llama.devices import build_info, resolve_device
from backends.llama.models.bundled import bundled_model_path
from backends.pool import ModelPool


def test_resolve_device_maps_specs_to_llama_settings() -> None:
    cpu = resolve_device(ModelSpec(device="cpu", threads=3, n_ctx=2048))
    assert cpu["n_gpu_layers"] == 0 and cpu["threads"] == 3 and cpu["n_ctx"] == 2048 and cpu["device"] == "cpu"
    auto = resolve_device(ModelSpec(device="auto"))
    assert auto["n_gpu_layers"] == (-1 if build_info()["gpu_offload"] else 0)
    assert resolve_device(ModelSpec(flash_attn=True))["flash_attn"] == "on"
    assert resolve_device(ModelSpec(device="cpu"))["flash_attn"] == "auto"  # llama.cpp turns it on for CPU
    assert resolve_device(ModelSpec(options=(("flash_attn", "off"),)))["flash_attn"] == "off"
    assert resolve_device(ModelSpec(device="cpu", n_gpu_layers=5))["n_gpu_layers"] == 5
    with pytest.raises(BackendError, match="Unknown device"):
        resolve_device(ModelSpec(device="tpu"))


@pytest.mark.skipif(build_info()["gpu_offload"], reason="this build has a GPU: the error cannot happen")
def test_gpu_device_on_a_cpu_build_explains_how_to_get_one() -> None:
    with pytest.raises(BackendError, match=r"docs/gpu\.md"):
        resolve_device(ModelSpec(device="gpu"))


def test_build_info_describes_this_build() -> None:
    info = build_info()
    assert info["llama_cpp_python"] and info["system_info"]
    assert any(d["type"] == "cpu" for d in info["devices"]) or not info["devices"]
    assert info["max_parallel_sequences"] >= 64


def test_pool_rejects_bad_sources(tmp_path: Path) -> None:
    pool = ModelPool()
    with pytest.raises(ModelFileError, match="does not exist"):
        pool.get(ModelSpec(source="path", path=str(tmp_path / "missing.gguf")))
    with pytest.raises(ModelFileError, match="needs a `path:`"):
        pool.get(ModelSpec(source="path"))
    with pytest.raises(BackendError, match="source 'fake'"):
        pool.get(ModelSpec(source="fake"))
    assert pool.loaded() == []


@pytest.mark.model
def test_pool_shares_one_model_per_file_and_settings() -> None:
    small = ModelSpec(device="cpu", n_ctx=256, options=(("kv_size", 512),))
    with ModelPool() as pool:
        first = pool.get(small)
        assert isinstance(first, LLMBackend)
        assert pool.get(small) is first
        assert pool.get(ModelSpec(source="path", path=str(bundled_model_path()), device="cpu", n_ctx=256,
                                  options=(("kv_size", 512),))) is first  # same file, same settings
        other = pool.get(ModelSpec(device="cpu", n_ctx=128, options=(("kv_size", 256),)))
        assert other is not first and other.model_id != first.model_id
        listed = pool.loaded()
        assert [entry["model"] for entry in listed] == [first.model_id, other.model_id]
        assert all(entry["size"] > 90_000_000 and entry["path"] == str(bundled_model_path()) for entry in listed)
        assert pool.unload(first.model_id) == 1
        assert [entry["model"] for entry in pool.loaded()] == [other.model_id]
        with pytest.raises(BackendError, match="unloaded"):
            first.generate("hi", first_params())
    assert pool.loaded() == []


def first_params():  # small helper so the unloaded-model call fails fast, before any decoding
    from backends.base import SamplingParams

    return SamplingParams(max_tokens=1)


@pytest.mark.model
def test_memory_budget_unloads_the_least_recently_used_model() -> None:
    a = ModelSpec(device="cpu", n_ctx=128, options=(("kv_size", 256),))
    b = ModelSpec(device="cpu", n_ctx=256, options=(("kv_size", 256),))
    with ModelPool(memory_budget_bytes=150_000_000) as pool:  # room for one 98 MB model
        first = pool.get(a)
        assert first.generate("One", first_params()).completions[0].completion_tokens == 1
        second = pool.get(b)
        assert [entry["model"] for entry in pool.loaded()] == [second.model_id]
        assert pool.get(b) is second


def test_first_build_info_calls_from_two_threads_run_llama_cpp_init_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # was: a model prefetch and the run's own first `get` both resolved a device at once, both ran llama.cpp's
    # backend init and device listing, and about 1 `metagen run` in 10 aborted ("unaligned tcache chunk detected")
    import functools
    import threading
    import time

    from backends.llama import devices

    inside, overlapped, calls = [0], [False], [0]
    real = devices._build_info.__wrapped__

    def watched() -> dict[str, object]:
        inside[0] += 1
        overlapped[0] = overlapped[0] or inside[0] > 1
        calls[0] += 1
        time.sleep(0.2)  # long enough that an unguarded second caller is inside too
        try:
            return real()
        finally:
            inside[0] -= 1

    monkeypatch.setattr(devices, "_build_info", functools.lru_cache(maxsize=1)(watched))
    threads = [threading.Thread(target=devices.build_info) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not overlapped[0] and calls[0] == 1
