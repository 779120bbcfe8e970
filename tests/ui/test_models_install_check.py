"""The Models tab's "Check this install": `metagen doctor`'s report as markdown, for the owner only."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from app.service.errors import UserError
from app.service.studio import StudioService
from app.share.policy import SharePolicy
from app.ui.models_tab import install_check_report

GOOD_REPORT = {"ok": True, "text": " Paris.", "tokens": 8, "tokens_per_s": 99.5}
CRASHING_CANARY = f"{sys.executable} -c \"import os, signal; os.kill(os.getpid(), signal.SIGABRT)\""


def _service(tmp_path: Path, policy: SharePolicy | None = None) -> StudioService:
    return StudioService(workflows_dir=tmp_path / "wf", examples_dir=None, models_dir=tmp_path / "models",
                         trace_db=tmp_path / "t.db", dry_run=True, **({"policy": policy} if policy else {}))


def test_the_button_shows_every_check_and_the_canarys_speed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    canary = tmp_path / "good_canary.py"
    canary.write_text(f"print({json.dumps(GOOD_REPORT)!r})\n")
    monkeypatch.setenv("METAGEN_CANARY_COMMAND", f"{sys.executable} {canary}")
    report = install_check_report(_service(tmp_path))
    for name in ("Python", "packages", "engine build", "GPU", "canary decode", "models", "disk space",
                 "code isolation", "Chromium", "Hugging Face Hub", "trace database"):
        assert f"**{name}**" in report, name
    assert "99.5 tokens/s" in report


def test_a_crashing_engine_is_a_problem_with_its_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METAGEN_CANARY_COMMAND", CRASHING_CANARY)
    service = _service(tmp_path)
    report = service.check_install()
    assert not report.ok
    canary = next(c for c in report.checks if c["name"] == "canary decode")
    assert "SIGABRT" in canary["detail"] and "make setup" in canary["fix"]
    text = install_check_report(service)
    assert "`[x]` **canary decode**" in text and "fix:" in text
    assert not any(ord(ch) > 0x2FFF for ch in text)  # no emoji: marks every font has


def test_visitors_of_a_shared_app_cannot_run_it(tmp_path: Path) -> None:
    service = _service(tmp_path, SharePolicy(share_mode=True))
    with pytest.raises(UserError, match="owner"):
        service.check_install()
    assert "owner" in install_check_report(service)
