"""First start: user folders created, examples copied once (never overwritten or resurrected)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.desktop.window import native_window_problem, prepare_user_data


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("METAGEN_WORKFLOWS", "METAGEN_MODELS", "METAGEN_TRACE_DB"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("METAGEN_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_first_start_creates_folders_and_copies_examples(home: Path, tmp_path: Path) -> None:
    examples = tmp_path / "examples"
    examples.mkdir()
    (examples / "alpha.yaml").write_text("name: alpha\n")
    (examples / "beta.yaml").write_text("name: beta\n")
    (examples / "../evil.yaml").write_text("x")  # outside the folder: never looked at

    report = prepare_user_data(examples)
    assert report.first_time
    assert {home, home / "workflows", home / "models"} <= set(report.created)
    assert report.examples_copied == ["alpha", "beta"]
    assert (home / "workflows" / "alpha.yaml").read_text() == "name: alpha\n"

    # the user edits one example and deletes the other: a later start keeps their choices
    (home / "workflows" / "alpha.yaml").write_text("name: mine\n")
    (home / "workflows" / "beta.yaml").unlink()
    (examples / "gamma.yaml").write_text("name: gamma\n")  # a new version ships a new example
    again = prepare_user_data(examples)
    assert not again.first_time
    assert again.examples_copied == ["gamma"]
    assert (home / "workflows" / "alpha.yaml").read_text() == "name: mine\n"
    assert not (home / "workflows" / "beta.yaml").exists()


def test_shipped_examples_are_copied(home: Path) -> None:
    from app.platform.resources import examples_dir

    shipped = sorted(p.stem for p in examples_dir().glob("*.yaml"))
    report = prepare_user_data()
    assert report.examples_copied == shipped
    assert sorted(p.stem for p in (home / "workflows").glob("*.yaml")) == shipped


def test_no_display_is_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    problem = native_window_problem()
    assert problem is not None
    assert "no graphical display" in problem or "pywebview is not installed" in problem
