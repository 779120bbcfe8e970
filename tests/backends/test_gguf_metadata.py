"""GGUF metadata reading on the bundled model, models-folder scans, and clear errors for broken files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from backends.base import ModelFileError
from backends.llama.models.bundled import bundled_model_path
from backends.llama.models.gguf import content_fingerprint, model_file_info, read_gguf_metadata, scan_models


@pytest.fixture(scope="module")
def bundled() -> Path:
    return bundled_model_path()


def _write_head(src: Path, dest: Path, n_bytes: int) -> Path:
    with open(src, "rb") as handle:
        dest.write_bytes(handle.read(n_bytes))
    return dest


def test_bundled_model_metadata(bundled: Path) -> None:
    meta = read_gguf_metadata(bundled)
    assert meta["general.architecture"] == "llama"
    assert meta["llama.context_length"] == 8192
    assert meta["llama.block_count"] == 30
    assert meta["tokenizer.ggml.tokens"] == {"array_of": "str", "length": 49152}  # long arrays summarised


def test_model_file_info_of_bundled_model(bundled: Path) -> None:
    info = model_file_info(bundled)
    assert info.quantization == "Q4_1"
    assert info.context_length == 8192
    assert info.architecture == "llama"
    assert info.size_bytes == bundled.stat().st_size
    assert info.chat_template is not None and "<|im_start|>" in info.chat_template
    data = info.to_json()
    assert data["path"] == str(bundled.resolve()) and data["name"]


def test_scan_models_lists_good_files_and_skips_broken_ones(bundled: Path, tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    os.symlink(bundled, tmp_path / "sub" / "smol.gguf")
    _write_head(bundled, tmp_path / "broken.gguf", 4096)
    (tmp_path / "notes.txt").write_text("not a model")
    found = scan_models(tmp_path)
    assert [Path(f.path).name for f in found] == [bundled.name]  # resolved through the symlink
    assert found[0].quantization == "Q4_1"
    assert scan_models(tmp_path / "missing") == []


def test_truncated_header_is_a_clear_error(bundled: Path, tmp_path: Path) -> None:
    path = _write_head(bundled, tmp_path / "cut.gguf", 200_000)  # ends inside the token list
    with pytest.raises(ModelFileError, match=r"cut\.gguf is truncated"):
        model_file_info(path)


def test_truncated_tensor_data_is_a_clear_error(bundled: Path, tmp_path: Path) -> None:
    path = _write_head(bundled, tmp_path / "half.gguf", bundled.stat().st_size // 2)
    with pytest.raises(ModelFileError, match=r"half\.gguf is truncated: its tensors need"):
        read_gguf_metadata(path)


def test_non_gguf_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "model.gguf"
    path.write_bytes(b"PK\x03\x04 this is a zip file")
    with pytest.raises(ModelFileError, match=r"model\.gguf is not a GGUF file"):
        model_file_info(path)


def test_missing_file_and_folder_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ModelFileError, match="does not exist"):
        model_file_info(tmp_path / "nope.gguf")
    with pytest.raises(ModelFileError, match="is a folder"):
        model_file_info(tmp_path)


def test_corrupt_counts_are_rejected(tmp_path: Path) -> None:
    path = tmp_path / "evil.gguf"
    path.write_bytes(b"GGUF" + (3).to_bytes(4, "little") + (1 << 40).to_bytes(8, "little") + bytes(8))
    with pytest.raises(ModelFileError, match="corrupt"):
        model_file_info(path)


def test_fingerprint_identifies_content(bundled: Path, tmp_path: Path) -> None:
    assert content_fingerprint(bundled) == content_fingerprint(bundled)
    a = tmp_path / "a.bin"
    b = tmp_path / "b.bin"
    a.write_bytes(b"x" * 3_000_000)
    b.write_bytes(b"x" * 2_999_999 + b"y")  # differs only in the tail
    assert content_fingerprint(a) != content_fingerprint(b)


@pytest.mark.model
def test_loading_a_corrupt_model_gives_the_clear_error(bundled: Path, tmp_path: Path) -> None:
    from backends.base import ModelSpec
    from backends.pool import ModelPool

    path = _write_head(bundled, tmp_path / "damaged.gguf", 5_000_000)
    with ModelPool() as pool, pytest.raises(ModelFileError, match=r"damaged\.gguf is truncated"):
        pool.get(ModelSpec(source="path", path=str(path), device="cpu"))
