"""Remembered device settings: validation, atomic JSON round trip, tolerant loading, provider wrapping."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.platform.settings import (
    DeviceSettings,
    Settings,
    device_settings_from,
    load_settings,
    save_settings,
    update_device_settings,
    with_device_settings,
)
from backends.base import ModelSpec


def test_defaults_when_missing(tmp_path: Path) -> None:
    assert load_settings(tmp_path / "settings.json") == Settings()


def test_round_trip_keeps_unknown_keys(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"version": 1, "future_key": {"a": 1}}))
    new = update_device_settings({"device": "cpu", "threads": "4", "n_gpu_layers": ""}, path)
    assert new.device == DeviceSettings("cpu", 4, None)
    data = json.loads(path.read_text())
    assert data["future_key"] == {"a": 1} and data["device"]["threads"] == 4
    assert load_settings(path).device == DeviceSettings("cpu", 4, None)
    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]  # no temp files left


@pytest.mark.parametrize(("values", "message"), [
    ({"device": "tpu"}, "device must be one of"),
    ({"threads": 0}, "threads must be"),
    ({"threads": "many"}, "threads must be"),
    ({"n_gpu_layers": -5}, "GPU layers"),
    ({"colour": "red"}, "unknown device setting"),
])
def test_bad_values_explain_themselves(values: dict, message: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=message):
        update_device_settings(values, tmp_path / "settings.json")
    assert not (tmp_path / "settings.json").exists()


def test_corrupt_file_falls_back_to_defaults(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "settings.json"
    path.write_text("{not json")
    assert load_settings(path) == Settings()
    assert "unreadable settings" in caplog.text
    path.write_text(json.dumps({"device": {"threads": -3}}))
    assert load_settings(path).device == DeviceSettings()


def test_settings_fill_only_what_the_workflow_left_open() -> None:
    settings = device_settings_from({"device": "gpu", "threads": 3, "n_gpu_layers": -1})
    assert settings.apply(ModelSpec()) == ModelSpec(device="gpu", threads=3, n_gpu_layers=-1)
    explicit = ModelSpec(device="cpu", threads=1, n_gpu_layers=0)
    assert settings.apply(explicit) == explicit


def test_provider_wrapper_reads_settings_at_each_load(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    seen: list[ModelSpec] = []
    provider = with_device_settings(lambda spec: seen.append(spec) or "backend",
                                    lambda: load_settings(path).device)
    provider(ModelSpec())
    save_settings(Settings(device=DeviceSettings(threads=2)), path)
    provider(ModelSpec())
    assert [s.threads for s in seen] == [None, 2]
