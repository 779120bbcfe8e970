"""The `cpu_weights` option: the Q8_0 copy is made once and reused, redone for a changed source, never left half
written, and `original` always loads the original; the choice is measured once, recorded and traced."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from backends.base import ModelFileError, ModelSpec, SamplingParams
from backends.llama.models.bundled import bundled_model_path
from backends.llama.models.cpu_weights import (
    COPY_KIND,
    WeightsChooser,
    choose_weights,
    decision_path,
    effective_choice,
    find_decision,
    judge,
    lacks_fast_cpu_path,
)
from backends.llama.models.gguf import find_model_files, model_file_info
from backends.llama.models.quantize import PARTIAL_SUFFIX, QuantizeError, quantized_copy, source_digest

CPU = {"device": "cpu", "requested": "cpu", "n_gpu_layers": 0, "threads": 2, "n_ctx": 512, "flash_attn": "on"}


def spec_for(path: Path, cpu_weights: str | None, n_ctx: int = 512) -> ModelSpec:
    return ModelSpec(source="path", path=str(path), device="cpu", threads=2, n_ctx=n_ctx, flash_attn=True,
                     cpu_weights=cpu_weights, options=(("kv_size", 1024), ("n_seq_max", 4)))


def figures(step1: float, step16: float, logprob: float) -> dict[str, Any]:
    return {"step_s_batch1": step1, "step_s_batch": step16, "batch": 16, "mean_logprob": logprob,
            "quality_tokens": 1000}


class FakeMeasure:
    """Stands in for weights_probe.measure_pair: fixed figures, counting calls."""

    def __init__(self, original: dict[str, Any], copy: dict[str, Any]) -> None:
        self.original, self.copy, self.calls = original, copy, 0

    def __call__(self, source: Path, copy: Path, spec: ModelSpec, device: dict[str, Any],
                 together: bool = True) -> tuple[dict[str, Any], dict[str, Any]]:
        self.calls += 1
        return self.original, self.copy


FASTER = FakeMeasure(figures(0.010, 0.080, -3.050), figures(0.010, 0.060, -3.055))


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of the bundled Q4_1 model (tests change and truncate their own copies of it)."""
    path = tmp_path_factory.mktemp("src") / "smol.gguf"
    shutil.copyfile(bundled_model_path(), path)
    return path


@pytest.fixture(scope="module")
def made(source: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(folder, copy): the Q8_0 copy of `source`, made once for the module."""
    folder = tmp_path_factory.mktemp("weights")
    return folder, quantized_copy(source, folder)


# -- pure rules ----------------------------------------------------------------------------------------


def test_judge_picks_the_copy_only_when_faster_and_quality_is_held() -> None:
    base = figures(0.010, 0.080, -3.050)
    assert judge(base, figures(0.010, 0.060, -3.055))[0] == COPY_KIND
    pick, reason = judge(base, figures(0.010, 0.060, -3.070))
    assert pick == "original" and "quality" in reason and "-0.0200" in reason
    pick, reason = judge(base, figures(0.010, 0.075, -3.050))  # 7% faster: inside the noise margin
    assert pick == "original" and "not faster at batch 16" in reason
    assert judge(base, figures(0.0105, 0.060, -3.050))[0] == COPY_KIND  # 5% slower alone, 33% faster batched
    assert "slower for a single sequence" in judge(base, figures(0.0115, 0.060, -3.050))[1]


def test_which_types_lack_a_fast_cpu_path() -> None:
    assert lacks_fast_cpu_path("Q4_1", "x86_64") and lacks_fast_cpu_path("Q5_1", "AMD64")
    assert not any(lacks_fast_cpu_path(t, "x86_64") for t in ("Q4_0", "Q8_0", "Q4_K_M", "Q6_K", "F16", "IQ4_XS"))
    assert lacks_fast_cpu_path("Q4_K_M", "arm64") and not lacks_fast_cpu_path("Q8_0", "arm64")


def test_defaults_and_bad_values() -> None:
    from backends.base import BackendError
    from backends.llama.models.cpu_weights import DEFAULT_CPU_WEIGHTS

    assert effective_choice(ModelSpec(source="path", path="x.gguf")) == "original"
    assert effective_choice(ModelSpec()) == DEFAULT_CPU_WEIGHTS.get("bundled", "original")
    assert effective_choice(ModelSpec(cpu_weights="q8_0")) == "q8_0"
    with pytest.raises(BackendError, match="auto, original, q8_0"):
        effective_choice(ModelSpec(cpu_weights="fast"))


def test_workflow_schema_takes_cpu_weights() -> None:
    from app.workflow.model_specs import model_field_problem, model_spec_from_dict

    assert model_spec_from_dict({"source": "bundled", "cpu_weights": "q8_0"}).cpu_weights == "q8_0"
    assert model_spec_from_dict({"source": "bundled"}).cpu_weights is None
    problem = model_field_problem("cpu_weights", "q8")
    assert problem is not None and "auto, original, q8_0" in problem[0] and "q8_0" in problem[1]


def test_gpu_runs_ignore_the_option(source: Path, tmp_path: Path) -> None:
    choice = choose_weights(source, spec_for(source, "q8_0"), {**CPU, "n_gpu_layers": -1}, tmp_path)
    assert choice.ran == "original" and "GPU" in choice.reason and not list(tmp_path.iterdir())


def test_original_never_makes_or_loads_a_copy(source: Path, made: tuple[Path, Path]) -> None:
    folder, _ = made
    before = sorted(folder.iterdir())
    choice = choose_weights(source, spec_for(source, "original"), CPU, folder)
    assert (choice.ran, choice.path, choice.reason) == ("original", str(source), "cpu_weights: original")
    assert choice.quantization == "Q4_1" and sorted(folder.iterdir()) == before


def test_no_folder_means_the_original_with_the_reason(source: Path) -> None:
    choice = choose_weights(source, spec_for(source, "q8_0"), CPU, None)
    assert choice.ran == "original" and "needs a folder" in choice.reason


def test_copies_in_the_models_folder_are_not_listed_as_models(made: tuple[Path, Path]) -> None:
    folder, copy = made
    models = folder.parent / "models-listing"
    (models / ".cpu-weights").mkdir(parents=True)
    shutil.copyfile(copy, models / ".cpu-weights" / copy.name)
    assert find_model_files(models) == []


# -- the copy ------------------------------------------------------------------------------------------


def test_copy_is_made_once_and_reused(source: Path, made: tuple[Path, Path]) -> None:
    folder, copy = made
    assert copy.parent == folder and source_digest(source) in copy.name and copy.name.startswith("smol.q8_0-")
    assert model_file_info(copy).quantization == "Q8_0"
    before = copy.stat()
    assert quantized_copy(source, folder) == copy
    choice = choose_weights(source, spec_for(source, "q8_0"), CPU, folder)
    after = copy.stat()
    assert (choice.ran, choice.path, choice.quantization) == ("q8_0", str(copy), "Q8_0")
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert not [p for p in folder.iterdir() if p.name.endswith(PARTIAL_SUFFIX)]


def test_changed_source_gets_a_new_copy(source: Path, tmp_path: Path) -> None:
    changed = tmp_path / "smol.gguf"
    shutil.copyfile(source, changed)
    first = quantized_copy(changed, tmp_path / "w")
    header_end = model_file_info(changed).size_bytes // 2
    with open(changed, "r+b") as handle:  # one byte of weight data, in the middle of the file
        handle.seek(header_end)
        byte = handle.read(1)
        handle.seek(header_end)
        handle.write(bytes([byte[0] ^ 0x01]))
    second = quantized_copy(changed, tmp_path / "w")
    assert second != first and first.exists() and second.exists()
    assert source_digest(changed) in second.name


def test_truncated_source_is_the_sources_error(source: Path, tmp_path: Path) -> None:
    cut = tmp_path / "smol.gguf"
    with open(source, "rb") as src, open(cut, "wb") as dst:
        dst.write(src.read(source.stat().st_size // 2))
    with pytest.raises(ModelFileError, match="truncated"):
        quantized_copy(cut, tmp_path / "w")
    with pytest.raises(ModelFileError, match="truncated"):
        choose_weights(cut, spec_for(cut, "q8_0"), CPU, tmp_path / "w")
    assert not (tmp_path / "w").exists() or not list((tmp_path / "w").iterdir())


def test_llama_cpp_failing_to_write_leaves_nothing_and_falls_back(source: Path, tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    long_name = tmp_path / ("m" * 225 + ".gguf")  # its partial file's name is too long for the file system
    os.link(source, long_name)
    folder = tmp_path / "w"
    with caplog.at_level(logging.WARNING, logger="backends.llama.models.cpu_weights"):
        choice = choose_weights(long_name, spec_for(long_name, "q8_0"), CPU, folder)
    assert choice.ran == "original" and choice.path == str(long_name)
    assert "could not convert" in choice.reason and "original weights are used instead" in choice.reason
    assert "using the original weights" in caplog.text
    assert list(folder.iterdir()) == []


def test_a_half_written_copy_is_removed(source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import llama_cpp

    def half_write(fname_inp: bytes, fname_out: bytes, params: Any) -> int:
        Path(fname_out.decode()).write_bytes(b"GGUF" + b"\0" * 100)
        return 0  # claims success: the header check must catch it

    monkeypatch.setattr(llama_cpp, "llama_model_quantize", half_write)
    with pytest.raises(QuantizeError, match="unreadable"):
        quantized_copy(source, tmp_path)
    assert list(tmp_path.iterdir()) == []
    choice = choose_weights(source, spec_for(source, "q8_0"), CPU, tmp_path)
    assert choice.ran == "original" and "could not be made" in choice.reason
    assert list(tmp_path.iterdir()) == []


def test_a_folder_that_cannot_be_made_falls_back(source: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the copies' folder should be")
    choice = choose_weights(source, spec_for(source, "q8_0"), CPU, blocker / "w")
    assert choice.ran == "original" and "Cannot create the folder" in choice.reason


# -- auto: measured once, stored, followed -------------------------------------------------------------


def test_auto_measures_once_and_follows_the_stored_decision(source: Path, made: tuple[Path, Path]) -> None:
    folder, copy = made
    decision_path(copy).unlink(missing_ok=True)
    measure = FakeMeasure(FASTER.original, FASTER.copy)
    first = choose_weights(source, spec_for(source, "auto"), CPU, folder, measure=measure)
    assert first.ran == "q8_0" and first.path == str(copy) and first.reason.startswith("auto: measured faster")
    assert first.measurement and first.measurement["pick"] == "q8_0"
    again = choose_weights(source, spec_for(source, "auto"), CPU, folder, measure=measure)
    assert again.ran == "q8_0" and measure.calls == 1  # read from the decision beside the copy
    assert find_decision(source, folder)["pick"] == "q8_0"  # type: ignore[index]
    other_threads = choose_weights(source, spec_for(source, "auto"), {**CPU, "threads": 1}, folder, measure=measure)
    assert other_threads.ran == "q8_0" and measure.calls == 2  # measured again for other CPU settings


def test_auto_keeps_the_original_when_quality_moves(source: Path, made: tuple[Path, Path]) -> None:
    folder, copy = made
    decision_path(copy).unlink(missing_ok=True)
    worse = FakeMeasure(figures(0.010, 0.080, -3.050), figures(0.009, 0.050, -3.080))
    choice = choose_weights(source, spec_for(source, "auto"), CPU, folder, measure=worse)
    assert choice.ran == "original" and choice.path == str(source)
    assert "quality" in choice.reason and "-0.0300" in choice.reason
    decision_path(copy).unlink()


def test_chooser_remembers_per_file_state(source: Path, made: tuple[Path, Path]) -> None:
    folder, _ = made
    chooser = WeightsChooser(folder)
    a = chooser.choose(source, spec_for(source, "q8_0"), CPU)
    assert chooser.choose(source, spec_for(source, "q8_0"), CPU) is a
    assert chooser.choose(source, spec_for(source, "original"), CPU).ran == "original"


# -- real loads: the pool, determinism, the trace ------------------------------------------------------


@pytest.fixture(scope="module")
def pool(made: tuple[Path, Path]) -> Iterator[Any]:
    from backends.pool import ModelPool

    with ModelPool(weights_dir=made[0]) as p:
        yield p


@pytest.mark.model
@pytest.mark.parametrize("choice", ["original", "q8_0", "q4_0"])
def test_pool_loads_the_chosen_weights_and_is_deterministic(choice: str, source: Path, made: tuple[Path, Path],
                                                            pool: Any) -> None:
    backend = pool.get(spec_for(source, choice))
    expected = {"original": source, "q8_0": made[1], "q4_0": quantized_copy(source, made[0], "q4_0")}[choice]
    if choice == "q4_0":  # a smaller copy than the Q4_1 source (the self-draft of speculative decoding)
        assert model_file_info(expected).quantization == "Q4_0"
    assert backend.path == expected.resolve()
    info = backend.info()["weights"]
    assert info["ran"] == choice and info["source_path"] == str(source)
    assert info["fingerprint"] in backend.model_id and expected.name in backend.model_id
    params = SamplingParams(max_tokens=12, temperature=0.9, top_k=40, seed=7)
    first = [c.text for c in backend.generate("Once upon a time", params, n=3).completions]
    second = [c.text for c in backend.generate("Once upon a time", params, n=3).completions]
    assert first == second and len(set(first)) > 1
    listed = next(e for e in pool.loaded() if e["model"] == backend.model_id)
    assert listed["source_path"] == str(source) and listed["weights"]["ran"] == choice
    assert len({e["model"] for e in pool.loaded()}) == len(pool.loaded())  # each choice its own model id


@pytest.mark.model
def test_real_probe_measures_both_files(source: Path, made: tuple[Path, Path],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import backends.llama.models.weights_probe as probe

    monkeypatch.setattr(probe, "QUALITY_PASSAGES", probe.QUALITY_PASSAGES[1:3])  # a third of the text: quicker
    original, copy = probe.measure_pair(source, made[1], spec_for(source, None), dict(CPU), rounds=1)
    for m in (original, copy):
        assert 0 < m.step_s_batch1 < 5 and 0 < m.step_s_batch < 20 and m.batch == 16 and m.quality_tokens > 400
    assert copy.quality_tokens == original.quality_tokens
    assert copy.mean_logprob != original.mean_logprob and abs(copy.mean_logprob - original.mean_logprob) < 0.05


@pytest.mark.model
def test_trace_records_which_weights_ran(source: Path, made: tuple[Path, Path], tmp_path: Path) -> None:
    from app.run.providers import llama_provider
    from app.run.scheduler import Scheduler
    from app.traces import TraceStore
    from app.workflow.spec import load_workflow_text
    from backends.pool import ModelPool
    from nodes.registry import default_registry

    workflow = f"""\
version: 1
name: weights-trace
models:
  main: {{source: path, path: "{source}", device: cpu, n_ctx: 512, threads: 2, cpu_weights: q8_0}}
nodes:
  - id: gen
    kind: generator
    params: {{max_tokens: 4, prompt: "Say hello."}}
outputs:
  text: gen.text
"""
    store = TraceStore(tmp_path / "traces.db")
    try:
        with ModelPool(weights_dir=made[0]) as pool:
            scheduler = Scheduler(default_registry(), llama_provider(pool))
            result = scheduler.run(load_workflow_text(workflow), seed=3, observers=[store])
        assert result.status == "succeeded", result.error
        record = store.get_run(result.run_id)
    finally:
        store.close()
    assert record is not None
    assert record["run"]["models"]["main"]["cpu_weights"] == "q8_0"
    assert any(made[1].name in m for m in record["run"]["model_ids"])
    [event] = [e for e in record["events"] if e["kind"] == "model"]
    assert event["node_id"] is None and event["data"]["alias"] == "main"
    weights = event["data"]["weights"]
    assert weights["ran"] == "q8_0" and weights["path"] == str(made[1]) and weights["reason"] == "cpu_weights: q8_0"
    assert weights["source_sha256"] == source_digest(source) and weights["fingerprint"] in event["data"]["model_id"]


@pytest.mark.model
def test_a_q4_0_copy_of_the_target_drafts_for_it(source: Path, made: tuple[Path, Path], pool: Any) -> None:
    """speculative: {method: draft} with the draft entry naming the target's own file with cpu_weights: q4_0 (the
    free self-draft): the pool loads the Q4_0 copy as the draft model, greedy text is the target's own, and most of
    the quantised copy's drafts are accepted."""
    from backends.base import SpeculativeSpec

    draft = spec_for(source, "q4_0")
    target = ModelSpec(source="path", path=str(source), device="cpu", threads=2, n_ctx=512, flash_attn=True,
                       cpu_weights="original", options=(("kv_size", 1024), ("n_seq_max", 4)),
                       speculative=SpeculativeSpec(method="draft", k=4, draft=draft, draft_alias="small",
                                                   adaptive=False))
    backend = pool.get(target)
    plain = pool.get(spec_for(source, "original"))
    draft_path = backend.info()["draft_model"]  # the pool's backend runs in a worker process: ask it
    assert draft_path is not None and draft_path.endswith(".gguf")
    assert model_file_info(draft_path).quantization == "Q4_0"
    prompt = "Repeat exactly: the cat sat on the mat, the cat sat on the mat, the cat sat on the mat."
    params = SamplingParams(max_tokens=32)
    result = backend.generate(prompt, params)
    assert result.completions[0].text == plain.generate(prompt, params).completions[0].text
    assert result.usage.draft_tokens > 0 and result.usage.draft_accepted > 0
