"""The Models tab's forms: an untouched device form saves (blank = automatic), typed numbers are checked, a folder
is not taken for a model file."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.platform.settings import load_settings
from app.service.errors import UserError
from app.service.studio import StudioService
from app.ui.models_tab import blank_if_none, device_form_values


@pytest.fixture
def service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StudioService:
    monkeypatch.setenv("METAGEN_HOME", str(tmp_path / "home"))
    return StudioService(workflows_dir=tmp_path / "wf", examples_dir=None, models_dir=tmp_path / "models",
                         trace_db=tmp_path / "t.db", dry_run=True)


def test_an_untouched_form_saves_automatic_threads_and_default_layers(service: StudioService) -> None:
    current = service.models.device_settings()
    form = device_form_values(current["device"], blank_if_none(current["threads"]),
                              blank_if_none(current["n_gpu_layers"]))
    saved = service.models.save_device_settings(form)
    assert saved["threads"] is None and saved["n_gpu_layers"] is None
    assert load_settings().device.threads is None


def test_typed_numbers_are_saved_and_shown_back(service: StudioService) -> None:
    service.models.save_device_settings(device_form_values("cpu", " 2 ", "0"))
    device = load_settings().device
    assert (device.device, device.threads, device.n_gpu_layers) == ("cpu", 2, 0)
    assert blank_if_none(device.n_gpu_layers) == "0"  # 0 (no offload) stays visible, unlike unset


@pytest.mark.parametrize(("threads", "layers", "message"), [("0", "", "threads"), ("many", "", "threads"),
                                                            ("", "-5", "GPU layers")])
def test_bad_numbers_say_what_to_fix(service: StudioService, threads: str, layers: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        service.models.save_device_settings(device_form_values("auto", threads, layers))


def test_adding_a_folder_as_a_model_says_it_is_a_folder(service: StudioService, tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"is a folder; give the path of a \.gguf file"):
        service.models.add(str(tmp_path))
