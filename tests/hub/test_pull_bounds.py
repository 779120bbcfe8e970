"""Pull bounds against a hostile fake Hub: no byte past the listed size, no unverifiable file unless --no-verify,
metadata answers capped, and a drip feed fails with `too_slow`."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from backends.llama.models import hub_api, hub_transfer
from backends.llama.models.hub import pull
from backends.llama.models.hub_api import repo_files
from backends.llama.models.hub_files import HubError
from tests import fake_hub as fake_module
from tests.fake_hub import FakeHub
from tests.hub.conftest import TINY_REPO

NAME = "tiny-Q4_K_M.gguf"


class Counted(hub_transfer.NoProgress):
    """Counts the bytes a transfer wrote (advance is called once per written chunk)."""

    def __init__(self) -> None:
        self.written = 0

    def advance(self, n: int) -> None:
        self.written += n


def _info_with(monkeypatch: pytest.MonkeyPatch, sibling: Any) -> None:
    def info(self: fake_module._Handler, repo: str) -> None:
        files = self.fake.repos[repo].files
        self._json({"id": repo, "sha": fake_module.COMMIT,
                    "siblings": [sibling(name, data) for name, data in files.items()]})

    monkeypatch.setattr(fake_module._Handler, "_info", info)


def test_a_file_bigger_than_listed_stops_at_the_listed_size(fake_hub: FakeHub, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    listed = 4165
    fake_hub.repos[TINY_REPO].files[NAME] = b"\0" * (8 << 20)  # 8 MB where 4,165 B are listed
    fake_hub.chunk = 1024
    _info_with(monkeypatch, lambda name, data: {"rfilename": name, "size": listed,
                                                "lfs": {"size": listed, "sha256": "ab" * 32}})
    counted = Counted()
    with pytest.raises(HubError) as err:
        pull(f"{TINY_REPO}:Q4_K_M", tmp_path / "m", progress=lambda: counted)
    assert err.value.code == "size_mismatch" and "more than the 4,165 bytes" in str(err.value)
    assert counted.written <= listed, f"{counted.written} bytes written past the listed {listed}"
    assert list((tmp_path / "m").iterdir()) == []


def _no_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Model info and tree without size or sha256, and no X-Linked-Etag on the file either."""
    _info_with(monkeypatch, lambda name, data: {"rfilename": name})
    monkeypatch.setattr(fake_module._Handler, "_tree", lambda self, repo: self._json([], 404))
    original = fake_module._Handler.send_header

    def send_header(self: fake_module._Handler, key: str, value: str) -> None:
        if key != "X-Linked-Etag":
            original(self, key, value)

    monkeypatch.setattr(fake_module._Handler, "send_header", send_header)


def test_a_file_with_neither_size_nor_sha256_is_refused_unless_no_verify(
        fake_hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _no_hashes(monkeypatch)
    with pytest.raises(HubError) as err:
        pull(f"{TINY_REPO}:Q4_K_M", tmp_path / "m")
    assert err.value.code == "unverifiable" and "--no-verify" in str(err.value)
    assert list((tmp_path / "m").iterdir()) == []
    got = pull(f"{TINY_REPO}:Q4_K_M", tmp_path / "m", verify=False)
    assert got.path.read_bytes() == fake_hub.repos[TINY_REPO].files[NAME]


def test_the_cli_takes_no_verify(fake_hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli.main import main

    _no_hashes(monkeypatch)
    folder = str(tmp_path / "m")
    assert main(["models", "pull", f"{TINY_REPO}:Q4_K_M", "--models-dir", folder]) != 0
    assert "--no-verify" in capsys.readouterr().err
    assert main(["models", "pull", f"{TINY_REPO}:Q4_K_M", "--models-dir", folder, "--no-verify"]) == 0


def test_a_huge_metadata_answer_is_refused(fake_hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    def huge_info(self: fake_module._Handler, repo: str) -> None:
        padding = [{"rfilename": f"f{i}.txt", "size": 1, "note": "x" * 200} for i in range(90_000)]  # about 20 MB
        self._json({"id": repo, "sha": fake_module.COMMIT, "siblings": padding})

    monkeypatch.setattr(fake_module._Handler, "_info", huge_info)
    with pytest.raises(HubError) as err:
        repo_files(TINY_REPO)
    assert f"more than {hub_api.MAX_METADATA_BYTES >> 20} MB" in str(err.value)


def test_a_drip_feed_fails_as_too_slow(fake_hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hub_transfer, "RATE_WINDOW_S", 0.5)
    monkeypatch.setattr(hub_transfer, "MIN_RATE_BYTES_S", 100_000)
    fake_hub.chunk, fake_hub.delay_s = 16, 0.05  # about 320 bytes/s
    fake_hub.repos[TINY_REPO].files[NAME] += b"\0" * 100_000  # listed as it is sent: only the rate is wrong
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            pull(f"{TINY_REPO}:Q4_K_M", tmp_path / "m")
        except HubError as exc:
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(30)  # a guard against the old endless wait, not a timing assertion
    assert not t.is_alive(), "the drip feed was still downloading"
    assert box["error"].code == "too_slow" and "too slow" in str(box["error"])
    assert (tmp_path / "m" / (NAME + ".part")).exists(), "the partial stays for the next pull"


def test_a_server_that_stalls_fails_within_the_rate_window(fake_hub: FakeHub, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """100 bytes, then silence: each read waited out the client's 60 s read timeout and the transfer resumed five
    times (362 s). The 4 KB/s rule now holds across resumes, and a read waits at most one rate window."""
    monkeypatch.setattr(hub_transfer, "RATE_WINDOW_S", 0.5)
    fake_hub.repos[TINY_REPO].files[NAME] += b"\0" * 100_000
    fake_hub.stall_after[NAME] = 100
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            pull(f"{TINY_REPO}:Q4_K_M", tmp_path / "m")
        except HubError as exc:
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(20)  # a guard against the old six-minute wait, not a timing assertion
    assert not t.is_alive(), "the stalled transfer was still waiting"
    assert box["error"].code == "too_slow", box["error"]
    assert len(fake_hub.ranges(NAME)) <= 2, fake_hub.ranges(NAME)  # no round of resumes against a silent server
