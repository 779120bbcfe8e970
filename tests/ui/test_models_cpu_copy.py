"""The Models tab's CPU weights: the column says which weights run or would, and "Make CPU-fast copy" writes the
Q8_0 copy into the models folder once and stores its measurement (real quantiser, measurement stubbed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.service.errors import UserError
from app.service.studio import StudioService
from app.share.policy import SharePolicy
from app.ui.models_tab import MODEL_COLUMNS, model_rows

pytestmark = pytest.mark.model


def make(tmp_path: Path, **kwargs: object) -> StudioService:
    return StudioService(workflows_dir=tmp_path / "wf", examples_dir=None, models_dir=tmp_path / "models",
                         trace_db=tmp_path / "t.db", **kwargs)  # type: ignore[arg-type]


def fake_measure(source: Path, copy: Path, spec: Any, device: dict[str, Any],
                 together: bool = True) -> tuple[dict[str, Any], dict[str, Any]]:
    def fig(step1: float, step16: float, lp: float) -> dict[str, Any]:
        return {"step_s_batch1": step1, "step_s_batch": step16, "batch": 16, "mean_logprob": lp,
                "quality_tokens": 1574}

    return fig(0.017, 0.128, -3.0581), fig(0.017, 0.085, -3.0661)


def test_make_cpu_copy_writes_once_measures_and_shows_the_result(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import backends.llama.models.weights_probe

    monkeypatch.setattr(backends.llama.models.weights_probe, "measure_pair", fake_measure)
    service = make(tmp_path)
    bundled = next(e for e in service.models.entries() if e["key"] == "bundled")
    assert bundled["weights"].startswith("original; Q4_1 has no fast CPU matrix path")
    message = service.models.make_cpu_copy("bundled")
    assert message.startswith("q8_0 copy: 1.51x speed at batch 16, 1.00x at batch 1, logprob diff -0.0080")
    assert "auto runs the copy" in message
    [copy] = list((tmp_path / "models" / ".cpu-weights").glob("*.gguf"))
    assert copy.name.startswith("SmolLM2-135M-Instruct.Q4_1.q8_0-")
    assert [e["key"] for e in service.models.entries()] == ["bundled"]  # the copy is not a model of its own
    rows, _ = model_rows(service)
    assert rows[0][MODEL_COLUMNS.index("CPU weights")].startswith("q8_0 copy: 1.51x")
    inode = copy.stat().st_ino
    service.models.make_cpu_copy("bundled")
    assert copy.stat().st_ino == inode  # measured again, copied once
    service.models.load("bundled")  # the bundled default is `original`: the column says what runs and why
    running = next(e for e in service.models.entries() if e["key"] == "bundled")["weights"]
    assert running.startswith("running original (Q4_1)")
    service.close()


def test_make_cpu_copy_is_the_owners_action(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="disabled on a shared app"):
        make(tmp_path, policy=SharePolicy(share_mode=True)).models.make_cpu_copy("bundled")
    with pytest.raises(UserError, match="dry-run"):
        make(tmp_path, dry_run=True).models.make_cpu_copy("bundled")
    with pytest.raises(UserError, match="no model 'nope'"):
        make(tmp_path).models.make_cpu_copy("nope")
