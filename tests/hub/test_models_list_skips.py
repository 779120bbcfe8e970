"""`metagen models list` skips a GGUF whose header is corrupt (nested arrays thousands deep) with its reason, and
lists the other files of the folder."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from backends.llama.models.gguf import ModelFileError, read_gguf_header
from tests.backends.rank_gguf import write_rank_gguf

ARRAY = 9


def nested_gguf(path: Path, depth: int) -> None:
    """A GGUF header with one key whose value is an array of an array of ... `depth` levels deep."""
    key = b"evil.nested"
    out = [b"GGUF", struct.pack("<I", 3), struct.pack("<Q", 0), struct.pack("<Q", 1),
           struct.pack("<Q", len(key)), key, struct.pack("<I", ARRAY)]
    out += [struct.pack("<IQ", ARRAY, 1)] * depth
    out.append(struct.pack("<IQ", 4, 0))  # the innermost: an empty array of u32
    path.write_bytes(b"".join(out))


def test_a_deeply_nested_header_is_a_model_file_error(tmp_path: Path) -> None:
    nested_gguf(tmp_path / "evil.gguf", 50_000)
    with pytest.raises(ModelFileError, match="nested deeper"):
        read_gguf_header(tmp_path / "evil.gguf", check_length=False)
    nested_gguf(tmp_path / "fine.gguf", 2)  # what real files hold still reads
    assert read_gguf_header(tmp_path / "fine.gguf", check_length=False).metadata["evil.nested"] == [[[]]]


def test_models_list_skips_the_bad_file_with_its_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli.main import main

    folder = tmp_path / "models"
    folder.mkdir()
    write_rank_gguf(folder / "good.gguf", seed=1)
    nested_gguf(folder / "evil.gguf", 50_000)
    (folder / "short.gguf").write_bytes(b"GGUF\x03\x00\x00\x00\x01")  # cut inside its header
    assert main(["models", "list", "--models-dir", str(folder), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert "good.gguf" in {m["file"] for m in listed["models"]}
    skipped = {Path(s["path"]).name: s["reason"] for s in listed["skipped"]}
    assert set(skipped) == {"evil.gguf", "short.gguf"} and "nested deeper" in skipped["evil.gguf"]
    assert main(["models", "list", "--models-dir", str(folder)]) == 0
    text = capsys.readouterr().out
    assert "good.gguf" in text and "skipped" in text and "evil.gguf" in text
