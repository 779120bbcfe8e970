"""The Models tab's catalogue: bundled model and GGUFs by folder or path, device, load and unload (real llama.cpp)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.service.errors import UserError
from app.service.studio import StudioService
from app.share.policy import SharePolicy
from app.ui.models_tab import MODEL_COLUMNS, human_size, model_rows
from backends.llama.models.bundled import bundled_model_path

pytestmark = pytest.mark.model


def make(tmp_path: Path, **kwargs: object) -> StudioService:
    return StudioService(workflows_dir=tmp_path / "wf", examples_dir=None, models_dir=tmp_path / "models",
                         trace_db=tmp_path / "t.db", **kwargs)  # type: ignore[arg-type]


def test_lists_the_bundled_model_with_its_facts_and_loads_and_unloads_it(tmp_path: Path) -> None:
    service = make(tmp_path)
    entries = service.models.entries()
    bundled = next(e for e in entries if e["key"] == "bundled")
    assert bundled["path"] == str(bundled_model_path().resolve())
    assert bundled["quantization"] == "Q4_1"
    assert bundled["context_length"] == 8192
    assert bundled["size_bytes"] > 50_000_000
    assert bundled["device"].startswith(("CPU", "GPU", "METAL"))
    assert bundled["loaded"] is False
    service.models.load("bundled")
    assert next(e for e in service.models.entries() if e["key"] == "bundled")["loaded"] is True
    rows, choices = model_rows(service)
    loaded, path = rows[0][MODEL_COLUMNS.index("loaded")], rows[0][MODEL_COLUMNS.index("path")]
    assert loaded == "yes" and ("SmolLM2" in path or path.endswith(".gguf"))
    assert choices[0][1] == "bundled"
    assert service.models.unload("bundled") is True
    assert next(e for e in service.models.entries() if e["key"] == "bundled")["loaded"] is False
    service.close()


def test_models_folder_and_added_paths(tmp_path: Path) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    shutil.copyfile(bundled_model_path(), folder / "copy.gguf")
    (tmp_path / "broken.gguf").write_bytes(b"GGUF not really")
    service = make(tmp_path)
    sources = [e["source"] for e in service.models.entries()]
    assert sources == ["bundled", "models folder"]
    with pytest.raises(UserError, match="not a usable GGUF"):
        service.models.add(str(tmp_path / "broken.gguf"))
    with pytest.raises(UserError, match="no file"):
        service.models.add(str(tmp_path / "missing.gguf"))
    shared = make(tmp_path, policy=SharePolicy(share_mode=True))
    with pytest.raises(UserError, match="disabled"):
        shared.models.add(str(folder / "copy.gguf"))


def test_human_sizes() -> None:
    assert human_size(98_362_432) == "93.8 MB"
    assert human_size(512) == "512 B"
    assert human_size(3 * 1024**3) == "3.0 GB"


def test_device_settings_are_checked_saved_and_shown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METAGEN_HOME", str(tmp_path / "home"))
    service = make(tmp_path)
    with pytest.raises(UserError, match="threads"):
        service.models.save_device_settings({"device": "cpu", "threads": 0, "n_gpu_layers": None})
    saved = service.models.save_device_settings({"device": "cpu", "threads": 1, "n_gpu_layers": None})
    assert saved == {"device": "cpu", "threads": 1, "n_gpu_layers": None}
    assert make(tmp_path).models.device_settings() == saved  # remembered in settings.json
    assert service.models.device_for("bundled") == "CPU · no layers offloaded · 1 threads"
    with pytest.raises(UserError, match="owner"):
        make(tmp_path, policy=SharePolicy(share_mode=True)).models.save_device_settings({"device": "cpu"})


def test_two_files_of_one_model_show_their_files(tmp_path: Path) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    shutil.copyfile(bundled_model_path(), folder / "smol-a.gguf")
    shutil.copyfile(bundled_model_path(), folder / "smol-b.gguf")
    names = [e["name"] for e in make(tmp_path).models.entries()]
    assert len(set(names)) == len(names), names
    assert any(n.endswith("· smol-a.gguf") for n in names) and any(n.endswith("· smol-b.gguf") for n in names)


def test_the_bundled_model_is_named_by_its_file_and_says_how_prompts_reach_it(tmp_path: Path) -> None:
    """Its GGUF's own name is a training run's ("Smollm2 135M 8k Lc100K Mix1 Ep2"); everything else says the file."""
    from tests.studio_fixtures import studio_service

    service = studio_service(tmp_path)
    bundled = next(e for e in service.models.entries() if e["source"] == "bundled")
    assert bundled["name"] == bundled_model_path().name
    rows, _ = model_rows(service)
    assert rows[0][MODEL_COLUMNS.index("prompts")] == "own template"
