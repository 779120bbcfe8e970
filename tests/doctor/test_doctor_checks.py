"""`metagen doctor`'s checks one by one, on made-up CPUs, builds, folders and databases."""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path

import pytest

from app.service import doctor_checks as checks
from app.service.doctor import DoctorReport, run_doctor
from tests.backends.rank_gguf import write_rank_gguf

SAPPHIRE_RAPIDS = ("flags\t\t: fpu sse2 pni ssse3 fma f16c avx avx2 bmi2 avx512f avx512_vnni avx512_bf16 avx512vbmi "
                   "amx_bf16 amx_tile amx_int8 avx_vnni\n")
ZEN3 = "flags\t\t: fpu sse2 pni ssse3 fma f16c avx avx2 bmi2\n"
NATIVE_AMX_BUILD = ("CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX_VNNI = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | "
                    "AVX512 = 1 | AVX512_VBMI = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 | AMX_INT8 = 1 | "
                    "LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 |")
NO_AMX_BUILD = NATIVE_AMX_BUILD.replace("AMX_INT8 = 1", "AMX_INT8 = 0")
AVX2_BUILD = "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | LLAMAFILE = 1 |"


def test_an_amx_build_on_an_amx_cpu_is_a_problem_with_its_fix() -> None:
    result = checks.compare_build(NATIVE_AMX_BUILD, checks.cpu_flags(SAPPHIRE_RAPIDS), amx_opt_in=False)
    assert result["status"] == checks.PROBLEM
    assert "AMX" in result["detail"] and "#20824" in result["detail"]
    assert "make setup" in result["fix"]


def test_an_amx_build_asked_for_is_a_warning() -> None:
    result = checks.compare_build(NATIVE_AMX_BUILD, checks.cpu_flags(SAPPHIRE_RAPIDS), amx_opt_in=True)
    assert result["status"] == checks.WARN
    assert "METAGEN_AMX" in result["fix"]


def test_the_default_build_on_an_amx_cpu_is_fine() -> None:
    result = checks.compare_build(NO_AMX_BUILD, checks.cpu_flags(SAPPHIRE_RAPIDS), amx_opt_in=False)
    assert result["status"] == checks.OK, result
    assert "AMX left out" in result["detail"]


def test_a_build_for_features_this_cpu_lacks_is_a_problem() -> None:
    result = checks.compare_build(NO_AMX_BUILD, checks.cpu_flags(ZEN3), amx_opt_in=False)
    assert result["status"] == checks.PROBLEM
    for feature in ("AVX512", "AVX512_VNNI", "AVX512_BF16", "AVX512_VBMI", "AVX_VNNI"):
        assert feature in result["detail"]
    assert "AVX2," not in result["detail"]
    assert "rebuild" in result["fix"]
    assert checks.compare_build(AVX2_BUILD, checks.cpu_flags(ZEN3), amx_opt_in=False)["status"] == checks.OK


def test_a_build_that_cannot_even_be_imported_is_a_problem() -> None:
    result = checks.check_engine_build("", "importing llama_cpp failed (SIGILL): ")
    assert result["status"] == checks.PROBLEM and "SIGILL" in result["detail"] and result["fix"]


def test_gpu_build_against_the_driver() -> None:
    assert checks.check_gpu("CUDA : ARCHS = 890 | " + AVX2_BUILD, "")["status"] == checks.PROBLEM
    assert checks.check_gpu("CUDA : ARCHS = 890 | " + AVX2_BUILD, "GPU 0: NVIDIA H100")["status"] == checks.OK
    cpu_with_gpu = checks.check_gpu(AVX2_BUILD, "GPU 0: NVIDIA H100")
    assert cpu_with_gpu["status"] == checks.WARN and "METAGEN_GPU=cuda" in cpu_with_gpu["fix"]
    assert checks.check_gpu(AVX2_BUILD, "")["status"] == checks.OK


def test_models_folder_lists_files_and_flags_broken_ones_and_leftover_downloads(tmp_path: Path) -> None:
    write_rank_gguf(tmp_path / "good.gguf", seed=1)
    assert checks.check_models(tmp_path)["status"] == checks.OK
    assert "1 model file(s)" in checks.check_models(tmp_path)["detail"]
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "half.gguf.part").write_bytes(b"GGUF" + b"\0" * 100)
    partial = checks.check_models(tmp_path)
    assert partial["status"] == checks.WARN and "half.gguf.part" in partial["detail"]
    assert "metagen models pull" in partial["fix"]
    data = (tmp_path / "good.gguf").read_bytes()
    (tmp_path / "cut.gguf").write_bytes(data[: len(data) // 2])
    (tmp_path / "notes.gguf").write_text("not a model")
    broken = checks.check_models(tmp_path)
    assert broken["status"] == checks.PROBLEM
    assert "cut.gguf" in broken["detail"] and "notes.gguf" in broken["detail"] and "good.gguf (" not in broken["detail"]
    assert "cut.gguf" in broken["fix"] and "notes.gguf" in broken["fix"]
    missing = checks.check_models(tmp_path / "none")
    assert missing["status"] == checks.OK and "does not exist yet" in missing["detail"]


def test_leftover_downloads_still_show_beside_invalid_files(tmp_path: Path) -> None:
    (tmp_path / "notes.gguf").write_text("not a model")
    (tmp_path / "half.gguf.part").write_bytes(b"GGUF" + b"\0" * 100)
    result = checks.check_models(tmp_path)
    assert result["status"] == checks.PROBLEM and "notes.gguf" in result["detail"]
    assert "half.gguf.part" in result["detail"] and "metagen models pull" in result["fix"]


def test_a_linked_file_s_contents_are_never_printed(tmp_path: Path) -> None:
    """A link in the models folder to a file that is not a model: named as invalid, its bytes never shown (the
    message used to quote the first four: b'QX7Z' here)."""
    secret = tmp_path / "secret.txt"
    secret.write_text("QX7Z the password file")
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "link.gguf").symlink_to(secret)
    result = checks.check_models(folder)
    assert result["status"] == checks.PROBLEM and "not a GGUF file" in result["detail"]
    assert "QX7Z" not in str(result), result


def test_the_hub_settings_never_show_the_token() -> None:
    secret = "hf_" + "x7" * 12
    result = checks.check_hub_env({"HF_TOKEN": secret, "HF_ENDPOINT": "https://mirror.example", "HF_HUB_OFFLINE": "1"})
    assert result["status"] == checks.OK
    assert secret not in str(result) and "HF_TOKEN set" in result["detail"]
    assert "https://mirror.example" in result["detail"] and "offline" in result["detail"]
    assert "not set" in checks.check_hub_env({}, reach=lambda url: None)["detail"]
    assert checks.check_hub_env({"HF_ENDPOINT": "mirror.example"})["status"] == checks.WARN


def test_an_unreachable_hub_is_a_warning_with_what_to_do() -> None:
    """Right after a pull proved the Hub unreachable, doctor said it was fine: it only read the settings."""
    refused = checks.check_hub_env({"HF_ENDPOINT": "http://127.0.0.1:9"})  # the discard port: nothing listens
    assert refused["status"] == checks.WARN and "cannot be reached" in refused["detail"]
    assert "HF_HUB_OFFLINE=1" in refused["fix"]
    asked: list[str] = []
    offline = checks.check_hub_env({"HF_HUB_OFFLINE": "1"}, reach=lambda url: asked.append(url) or "down")
    assert offline["status"] == checks.OK and not asked  # offline: never asked


def test_a_hub_that_answers_is_fine() -> None:
    from tests.fake_hub import FakeHub

    hub = FakeHub().start()
    try:
        result = checks.check_hub_env({"HF_ENDPOINT": hub.url})
    finally:
        hub.stop()
    assert result["status"] == checks.OK and "the Hub answers" in result["detail"]


def test_trace_database_quick_check(tmp_path: Path) -> None:
    db = tmp_path / "traces.db"
    assert checks.check_traces(db)["status"] == checks.OK  # not made yet
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, name TEXT)")
        conn.executemany("INSERT INTO runs (name) VALUES (?)", [(f"run {i}" * 50,) for i in range(400)])
        conn.execute("CREATE INDEX runs_name ON runs (name)")
    conn.close()
    assert checks.check_traces(db)["status"] == checks.OK
    data = bytearray(db.read_bytes())
    page = 4096
    data[3 * page: 3 * page + 200] = b"\xff" * 200  # a btree page's header overwritten
    db.write_bytes(bytes(data))
    broken = checks.check_traces(db)
    assert broken["status"] == checks.PROBLEM, broken
    assert f"mv {db}" in broken["fix"]
    (tmp_path / "junk.db").write_bytes(b"this is not sqlite" * 100)
    assert checks.check_traces(tmp_path / "junk.db")["status"] == checks.PROBLEM


def test_isolation_and_chromium_say_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METAGEN_CODE_ISOLATION", "none")
    off = checks.check_isolation()
    assert off["status"] == checks.WARN and "METAGEN_CODE_ISOLATION=none" in off["detail"]
    missing = checks.check_chromium(str(tmp_path / "chromium"))
    assert missing["status"] == checks.WARN and "make system-deps" in missing["fix"]
    assert checks.check_chromium(sys.executable)["status"] == checks.OK


def test_bwrap_is_found_by_an_absolute_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from nodes.algorithms import code_exec

    fake = tmp_path / "bin" / "bwrap"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.delenv("METAGEN_CODE_ISOLATION", raising=False)
    code_exec.bwrap_path.cache_clear()
    try:
        assert code_exec.bwrap_path() == str(fake)
        works, why = code_exec.isolation_probe()
        assert not works and str(fake) in why and "No permissions to create new namespace" in why
        result = checks.check_isolation()
        assert result["status"] == checks.WARN and "bubblewrap" in result["fix"]
    finally:
        code_exec.bwrap_path.cache_clear()
        code_exec._bwrap_sizes.cache_clear()


def test_disk_space_levels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(checks.shutil, "disk_usage", lambda _p: usage(100 << 30, 99 << 30, 512 << 20))
    low = checks.check_disk({"data": tmp_path / "not" / "yet"})
    assert low["status"] == checks.PROBLEM and "512.0 MiB free" in low["detail"] and low["fix"]
    monkeypatch.setattr(checks.shutil, "disk_usage", lambda _p: usage(100 << 30, 10 << 30, 90 << 30))
    assert checks.check_disk({"data": tmp_path, "models": tmp_path})["status"] == checks.OK


class _PoolWithBroken:
    def broken(self) -> dict[str, str]:
        return {"Qwen3-0.6B-Q4_K_M.gguf": "its engine stopped 3 times in a row (SIGSEGV)"}


def test_broken_models_from_the_pool_when_it_keeps_them() -> None:
    assert checks.check_broken_models(None) is None
    assert checks.check_broken_models(object()) is None
    result = checks.check_broken_models(_PoolWithBroken())
    assert result is not None and result["status"] == checks.PROBLEM
    assert "Qwen3-0.6B-Q4_K_M.gguf: its engine stopped 3 times" in result["detail"] and result["fix"]


def test_report_exit_code_and_renderings() -> None:
    fine = DoctorReport([checks.check("a", checks.OK, "fine"), checks.check("b", checks.WARN, "meh", "do x")])
    assert fine.exit_code == 0 and "1 warning" in fine.summary()
    broken = DoctorReport([*fine.checks, checks.check("c", checks.PROBLEM, "bad_thing <x>", "do y")])
    assert broken.exit_code == 1 and "c" in broken.summary()
    text = broken.to_text()
    assert "[x] c: bad_thing <x>" in text and "    fix: do y" in text
    assert "bad\\_thing &lt;x&gt;" in broken.to_markdown()
    assert broken.to_dict()["ok"] is False


def test_run_doctor_puts_the_pools_broken_models_in_the_report(tmp_path: Path) -> None:
    report = run_doctor(models_dir=tmp_path / "models", trace_db=tmp_path / "t.db", pool=_PoolWithBroken(),
                        canary=False)
    names = [c["name"] for c in report.checks]
    assert names[:4] == ["Python", "packages", "engine build", "GPU"]
    assert "broken models" in names and "canary decode" not in names
    assert report.exit_code == 1


def test_checking_a_wal_database_leaves_no_files_behind(tmp_path: Path) -> None:
    from app.traces.store import TraceStore

    TraceStore(tmp_path / "traces.db").close()
    before = sorted(p.name for p in tmp_path.iterdir())
    assert checks.check_traces(tmp_path / "traces.db")["status"] == checks.OK
    assert sorted(p.name for p in tmp_path.iterdir()) == before
