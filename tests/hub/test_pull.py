"""Pulling GGUFs from the fake Hub: quant choice, resume after a cut, sha256 refusal, cancel, errors, reuse."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from backends.llama.models.hub import pull
from backends.llama.models.hub_files import HubError, HubFile, quant_of, select_files
from tests.fake_hub import FakeHub
from tests.hub.conftest import TINY_REPO


def test_quant_tags_and_selection() -> None:
    assert quant_of("Qwen3-0.6B-Q4_K_M.gguf") == "Q4_K_M"
    assert quant_of("smollm2-135m-instruct.q8_0.gguf") == "Q8_0"
    assert quant_of("Big-IQ4_XS-00002-of-00003.gguf") == "IQ4_XS"
    assert quant_of("model-bf16.gguf") == "BF16"
    files = [HubFile(f"Big-Q4_K_M-0000{i}-of-00003.gguf", 10, None) for i in (1, 2, 3)]
    files += [HubFile("Big-Q8_0.gguf", 30, None), HubFile("mmproj-F16.gguf", 5, None)]
    assert [f.path for f in select_files("r", files)] == [f.path for f in files[:3]]  # shards pulled whole
    assert [f.path for f in select_files("r", files, "q8_0")] == ["Big-Q8_0.gguf"]
    assert len(select_files("r", files, filename="Big-Q4_K_M-00002-of-00003.gguf")) == 3
    with pytest.raises(HubError) as err:
        select_files("r", files, "Q2_K")
    assert err.value.code == "unknown_quant" and "Q4_K_M" in str(err.value) and "Q8_0" in str(err.value)


def test_pull_default_and_named_quant(fake_hub: FakeHub, tmp_path: Path) -> None:
    models = tmp_path / "models"
    got = pull(TINY_REPO, models)
    assert got.path == models / "tiny-Q4_K_M.gguf" and got.how == {"tiny-Q4_K_M.gguf": "downloaded"}
    assert got.path.read_bytes() == fake_hub.repos[TINY_REPO].files["tiny-Q4_K_M.gguf"]
    got = pull(f"{TINY_REPO}:q8_0", models)
    assert got.path.name == "tiny-Q8_0.gguf"
    assert sorted(p.name for p in models.iterdir()) == ["tiny-Q4_K_M.gguf", "tiny-Q8_0.gguf"]
    again = pull(f"{TINY_REPO}:Q8_0", models)  # same sha256 already here: nothing is downloaded
    assert again.how == {"tiny-Q8_0.gguf": "already here"}
    assert len(fake_hub.ranges("tiny-Q8_0.gguf")) == 1


def test_cut_transfer_resumes_with_range(fake_hub: FakeHub, tmp_path: Path) -> None:
    size = len(fake_hub.repos[TINY_REPO].files["tiny-Q4_K_M.gguf"])
    fake_hub.chunk = 1024
    fake_hub.cut_once["tiny-Q4_K_M.gguf"] = size // 2
    got = pull(f"{TINY_REPO}:Q4_K_M", tmp_path / "m")
    ranges = fake_hub.ranges("tiny-Q4_K_M.gguf")
    assert ranges[0] is None and ranges[1] is not None and ranges[1].startswith("bytes=")
    resumed_at = int(ranges[1].removeprefix("bytes=").rstrip("-"))
    assert 0 < resumed_at <= size // 2
    want = hashlib.sha256(fake_hub.repos[TINY_REPO].files["tiny-Q4_K_M.gguf"]).hexdigest()
    assert hashlib.sha256(got.path.read_bytes()).hexdigest() == want


def test_partial_resumes_on_next_pull(fake_hub: FakeHub, tmp_path: Path) -> None:
    models = tmp_path / "m"
    models.mkdir()
    data = fake_hub.repos[TINY_REPO].files["tiny-Q4_K_M.gguf"]
    (models / "tiny-Q4_K_M.gguf.part").write_bytes(data[:1000])  # left by a cancelled pull
    got = pull(TINY_REPO, models)
    assert fake_hub.ranges("tiny-Q4_K_M.gguf") == ["bytes=1000-"]
    assert got.how == {"tiny-Q4_K_M.gguf": "downloaded, resumed from 1 KB of an earlier pull"}
    assert (models / "tiny-Q4_K_M.gguf").read_bytes() == data and not (models / "tiny-Q4_K_M.gguf.part").exists()


def test_wrong_bytes_are_refused(fake_hub: FakeHub, tmp_path: Path) -> None:
    fake_hub.corrupt.add("tiny-Q4_K_M.gguf")
    with pytest.raises(HubError) as err:
        pull(TINY_REPO, tmp_path / "m")
    assert err.value.code == "sha_mismatch" and "sha256" in str(err.value)
    assert list((tmp_path / "m").iterdir()) == []


def test_cancel_keeps_the_partial(fake_hub: FakeHub, tmp_path: Path) -> None:
    fake_hub.chunk, fake_hub.delay_s = 1024, 0.005
    calls = {"n": 0}

    def cancel() -> bool:
        calls["n"] += 1
        return calls["n"] > 1

    with pytest.raises(HubError) as err:
        pull(TINY_REPO, tmp_path / "m", cancel=cancel)
    assert err.value.code == "cancelled"
    assert [p.name for p in (tmp_path / "m").iterdir()] == ["tiny-Q4_K_M.gguf.part"]
    assert (tmp_path / "m" / "tiny-Q4_K_M.gguf.part").stat().st_size > 0


@pytest.mark.parametrize(("ref", "code", "words"), [
    ("tester/nothing-here", "unknown_repo", "no model repo"),
    ("tester/no-gguf", "no_gguf", "no GGUF"),
    (f"{TINY_REPO}:Q2_K", "unknown_quant", "Q4_K_M, Q8_0"),
    ("not a repo", "bad_ref", "USER/REPO"),
])
def test_clear_errors(fake_hub: FakeHub, tmp_path: Path, ref: str, code: str, words: str) -> None:
    with pytest.raises(HubError) as err:
        pull(ref, tmp_path / "m")
    assert err.value.code == code and words in str(err.value)


def test_offline_and_gated(fake_hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_hub.add("tester/gated", {"g-Q4_K_M.gguf": b"GGUF" + b"\0" * 60}, gated=True)
    with pytest.raises(HubError) as err:
        pull("tester/gated", tmp_path / "m")
    assert err.value.code == "gated" and "HF_TOKEN" in str(err.value)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubError) as err:
        pull(TINY_REPO, tmp_path / "m")
    assert err.value.code == "offline" and "HF_HUB_OFFLINE" in str(err.value)
    assert fake_hub.ranges("tiny-Q4_K_M.gguf") == []


def test_invalid_gguf_is_refused(fake_hub: FakeHub, tmp_path: Path) -> None:
    fake_hub.add("tester/broken", {"b-Q4_K_M.gguf": b"NOTGGUF" * 50})
    with pytest.raises(HubError) as err:
        pull("tester/broken", tmp_path / "m")
    assert err.value.code == "invalid_gguf"
    assert list((tmp_path / "m").iterdir()) == []


def test_reuses_the_hf_cache(fake_hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from huggingface_hub import constants, hf_hub_download

    # huggingface_hub reads HF_HUB_OFFLINE once, at import: an earlier offline test may have imported it
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)

    # huggingface_hub itself, against the fake Hub (it reads HF_ENDPOINT once, at import: pass it)
    cached = hf_hub_download(TINY_REPO, "tiny-Q8_0.gguf", endpoint=fake_hub.url,
                             cache_dir=os.environ["HF_HUB_CACHE"])
    before = len(fake_hub.ranges("tiny-Q8_0.gguf"))
    got = pull(f"{TINY_REPO}:Q8_0", tmp_path / "m")
    assert got.how == {"tiny-Q8_0.gguf": "from the Hugging Face cache"}
    assert len(fake_hub.ranges("tiny-Q8_0.gguf")) == before
    assert got.path.read_bytes() == Path(cached).read_bytes()


def test_sharded_gguf_is_pulled_whole(fake_hub: FakeHub, tmp_path: Path) -> None:
    one = fake_hub.repos[TINY_REPO].files["tiny-Q4_K_M.gguf"]
    two = fake_hub.repos[TINY_REPO].files["tiny-Q8_0.gguf"]
    fake_hub.add("tester/Split-GGUF", {"Q4_K_M/Split-Q4_K_M-00001-of-00002.gguf": one,
                                       "Q4_K_M/Split-Q4_K_M-00002-of-00002.gguf": two,
                                       "Split-Q8_0.gguf": two})
    got = pull("tester/Split-GGUF", tmp_path / "m")
    assert got.path.name == "Split-Q4_K_M-00001-of-00002.gguf"
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["Split-Q4_K_M-00001-of-00002.gguf",
                                                                  "Split-Q4_K_M-00002-of-00002.gguf"]
    assert (tmp_path / "m" / "Split-Q4_K_M-00002-of-00002.gguf").read_bytes() == two


def test_revision_and_disk_check(fake_hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil
    from collections import namedtuple

    pull(f"{TINY_REPO}:Q8_0", tmp_path / "m", revision="v1")
    assert any(p.startswith(f"/api/models/{TINY_REPO}/revision/v1") for _, p, _ in fake_hub.requests)
    assert any("/resolve/v1/tiny-Q8_0.gguf" in p for _, p, _ in fake_hub.requests)
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda _: usage(10**9, 10**9 - 1000, 1000))
    with pytest.raises(HubError) as err:
        pull(TINY_REPO, tmp_path / "m")
    assert err.value.code == "disk_full" and "free" in str(err.value)
    assert not (tmp_path / "m" / "tiny-Q4_K_M.gguf.part").exists()


def test_hashes_from_the_tree_when_the_info_lacks_them(fake_hub: FakeHub, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from tests import fake_hub as fake_module

    original = fake_module._Handler._info

    def bare_info(self: fake_module._Handler, repo: str) -> None:  # siblings without lfs, as some mirrors answer
        found = self.fake.repos[repo]
        self._json({"id": repo, "sha": fake_module.COMMIT, "siblings": [{"rfilename": n} for n in found.files]})

    monkeypatch.setattr(fake_module._Handler, "_info", bare_info)
    fake_hub.corrupt.add("tiny-Q4_K_M.gguf")
    with pytest.raises(HubError) as err:
        pull(TINY_REPO, tmp_path / "m")
    assert err.value.code == "sha_mismatch"
    assert any("/tree/" in p for _, p, _ in fake_hub.requests)
    monkeypatch.setattr(fake_module._Handler, "_info", original)


def test_linked_etag_verifies_when_no_listing_has_hashes(fake_hub: FakeHub, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from tests import fake_hub as fake_module

    def bare_info(self: fake_module._Handler, repo: str) -> None:
        self._json({"id": repo, "sha": fake_module.COMMIT,
                    "siblings": [{"rfilename": n} for n in self.fake.repos[repo].files]})

    monkeypatch.setattr(fake_module._Handler, "_info", bare_info)
    monkeypatch.setattr(fake_module._Handler, "_tree", lambda self, repo: self._json([], 404))
    fake_hub.corrupt.add("tiny-Q4_K_M.gguf")
    with pytest.raises(HubError) as err:
        pull(TINY_REPO, tmp_path / "m")
    assert err.value.code == "sha_mismatch" and list((tmp_path / "m").iterdir()) == []
