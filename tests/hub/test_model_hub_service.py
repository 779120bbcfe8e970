"""The Models tab's Hub service: a repo's GGUFs with the fit estimate and the recommended quant, a pull with
progress reports and cancel, and a shared app refusing all of it."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from app.service.errors import UserError
from app.service.studio import StudioService
from app.share.policy import SharePolicy
from tests.fake_hub import FakeHub
from tests.hub.conftest import TINY_REPO


def service_for(tmp_path: Path, shared: bool = False) -> StudioService:
    models = tmp_path / "models"
    models.mkdir(exist_ok=True)
    policy = (SharePolicy.for_serving("127.0.0.1", force_share_mode=True, models_folder=models) if shared
              else SharePolicy.local())
    return StudioService(policy=policy, dry_run=True, workflows_dir=tmp_path / "wf", examples_dir=None,
                         models_dir=models, trace_db=tmp_path / "t.db")


def test_repo_files_fit_and_recommend(fake_hub: FakeHub, tmp_path: Path) -> None:
    hub = service_for(tmp_path).hub
    found = hub.repo_files(TINY_REPO, n_ctx=256)
    assert [r["quant"] for r in found["rows"]] == ["Q4_K_M", "Q8_0"]
    assert all(r["fits"] is True and r["kv_known"] for r in found["rows"])  # a few KB of BERT fits anywhere
    q4 = found["rows"][0]
    assert q4["recommended"] and q4["need_bytes"] > q4["size_bytes"] + q4["kv_bytes"] - 1
    assert found["architecture"] == "bert" and found["where"] in ("RAM", "VRAM")
    bigger = hub.repo_files(TINY_REPO, n_ctx=4096)["rows"][0]
    assert bigger["kv_bytes"] == 16 * q4["kv_bytes"]  # the KV cache grows with the context
    assert [s["repo"] for s in hub.search("tiny")] == [TINY_REPO]


def test_pull_reports_progress_and_cancel_keeps_partial(fake_hub: FakeHub, tmp_path: Path) -> None:
    hub = service_for(tmp_path).hub
    seen: list[tuple[str, int, int | None]] = []
    got = hub.pull(TINY_REPO, "tiny-Q8_0.gguf", lambda name, done, total, rate: seen.append((name, done, total)))
    assert got["file"] == "tiny-Q8_0.gguf" and got["entry"]["source"] == "path"
    assert seen[-1][1] == seen[-1][2] and seen[0][1] == 0
    fake_hub.chunk, fake_hub.delay_s = 512, 0.02
    errors: list[Exception] = []
    started = threading.Event()

    def run() -> None:
        try:
            hub.pull(TINY_REPO, "tiny-Q4_K_M.gguf", lambda *a: started.set())
        except UserError as exc:
            errors.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    assert started.wait(30)
    assert hub.cancel() is True
    worker.join(30)
    assert errors and errors[0].code == "cancelled"
    assert (tmp_path / "models" / "tiny-Q4_K_M.gguf.part").exists()
    assert not (tmp_path / "models" / "tiny-Q4_K_M.gguf").exists()


def test_shared_app_refuses(fake_hub: FakeHub, tmp_path: Path) -> None:
    hub = service_for(tmp_path, shared=True).hub
    for call in (lambda: hub.search("tiny"), lambda: hub.repo_files(TINY_REPO), lambda: hub.pull(TINY_REPO, None),
                 hub.cancel, hub.recommended):
        with pytest.raises(UserError) as err:
            call()
        assert err.value.code == "shared"
    assert fake_hub.requests == []


def test_recommended_says_whether_each_fits_this_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from app.ui.get_model import recommended_rows
    from backends.llama.models import hub_fit

    monkeypatch.setattr(hub_fit, "available_memory", lambda build: (2_000_000_000, "RAM"))  # 2 GB free
    service = service_for(tmp_path)
    entries = service.hub.recommended()
    small = next(e for e in entries if float(e["size_gb"]) < 1.0)
    large = next(e for e in entries if float(e["size_gb"]) > 3.0)
    assert small["fits_here"] is True and large["fits_here"] is False
    fits_column = {row[1]: row[2] for row in recommended_rows(service)}
    assert fits_column[small["name"]] == "yes (RAM)" and fits_column[large["name"]] == "no (RAM)"
    assert not {"laptop", "gpu24"} & set(fits_column.values())
    monkeypatch.setattr(hub_fit, "available_memory", lambda build: (None, "RAM"))
    assert {row[2] for row in recommended_rows(service)} == {"unknown"}
