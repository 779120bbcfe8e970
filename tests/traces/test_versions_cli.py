"""`metagen history`, `diff`, `restore` and `publish` (issue 50, item 3), in process: the JSON contract, NAME@VERSION
references, NAME@git:REV, files, and restore keeping the current file."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from app.cli.main import main
from app.workflow.spec import load_workflow_text

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = (ROOT / "workflows" / "self_consistency.yaml").read_text(encoding="utf-8")
EDITED = EXAMPLE.replace("n: 8", "n: 16")


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    wf = tmp_path / "wf"
    wf.mkdir()
    return wf


def flags(folder: Path) -> list[str]:
    return ["--workflows", str(folder), "--db", str(folder.parent / "t.db")]


def test_history_diff_restore_publish(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = folder / "sc.yaml"
    path.write_text(EXAMPLE, encoding="utf-8")
    code, out, _ = cli(capsys, "history", "sc", "--json", *flags(folder))
    assert code == 0
    data: dict[str, Any] = json.loads(out)
    assert list(data) == ["versions"] and len(data["versions"]) == 1
    first = data["versions"][0]
    assert set(first) == {"version", "name", "message", "created_at", "runs", "best"}
    assert first["version"] == load_workflow_text(EXAMPLE).semantic_hash() and first["runs"] == 0
    path.write_text(EDITED, encoding="utf-8")  # edited outside the studio: recorded when listed
    code, out, _ = cli(capsys, "history", "sc", "--json", *flags(folder))
    newest, older = json.loads(out)["versions"]
    assert older["version"] == first["version"] and newest["version"] != first["version"]

    code, out, _ = cli(capsys, "diff", "sc@-1", "sc", *flags(folder))
    assert code == 0 and "~ think.n: 8 → 16" in out
    code, out, _ = cli(capsys, "diff", f"sc@{first['version'][:7]}", "sc@latest", "--json", *flags(folder))
    assert json.loads(out)["params"] == [{"node": "think", "param": "n", "old": 8, "new": 16}]
    code, out, _ = cli(capsys, "diff", str(ROOT / "workflows" / "self_consistency.yaml"), str(path), "--json")
    assert code == 0 and json.loads(out)["params"][0]["new"] == 16

    code, out, _ = cli(capsys, "history", "sc", "--set-name", first["version"][:6], "v1", *flags(folder))
    assert code == 0 and "(v1)" in out
    code, out, _ = cli(capsys, "publish", "sc@v1", "--json", *flags(folder))
    assert code == 0 and json.loads(out)["version"] == first["version"]
    code, out, _ = cli(capsys, "publish", "sc", "--show", *flags(folder))
    assert first["version"] in out

    path.write_text(EDITED.replace("n: 16", "n: 5"), encoding="utf-8")
    code, out, _ = cli(capsys, "restore", "sc@v1", *flags(folder))
    assert code == 0 and path.read_text(encoding="utf-8") == EXAMPLE
    code, out, _ = cli(capsys, "history", "sc", "--json", *flags(folder))
    assert len(json.loads(out)["versions"]) == 3  # the n=5 file was kept before the restore

    code, _, err = cli(capsys, "diff", "sc@nope", "sc", *flags(folder))
    assert code != 0 and "has no version 'nope'" in err
    code, _, err = cli(capsys, "restore", "sc", *flags(folder))
    assert code != 0 and "sc@VERSION" in err


def test_diff_against_a_git_revision(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if shutil.which("git") is None:
        pytest.skip("needs git")
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    repo = tmp_path / "repo"
    (repo / "flows").mkdir(parents=True)
    path = repo / "flows" / "sc.yaml"
    path.write_text(EXAMPLE, encoding="utf-8")
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "one"]):
        subprocess.run(["git", *args], cwd=repo, check=True, env=env, capture_output=True)
    path.write_text(EDITED, encoding="utf-8")
    code, out, err = cli(capsys, "diff", "sc@git:HEAD", "sc", "--json", "--workflows", str(repo / "flows"),
                         "--db", str(tmp_path / "t.db"))
    assert code == 0, err
    assert json.loads(out)["params"] == [{"node": "think", "param": "n", "old": 8, "new": 16}]
    code, _, err = cli(capsys, "diff", "sc@git:nosuchrev", "sc", "--workflows", str(repo / "flows"),
                       "--db", str(tmp_path / "t.db"))
    assert code != 0 and "nosuchrev" in err


def test_textconv_prints_a_file_that_is_not_a_workflow_as_it_is(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    odd = tmp_path / "odd.yaml"
    odd.write_text("just: [text\n", encoding="utf-8")
    code, out, _ = cli(capsys, "diff", str(odd))
    assert code == 0 and out == "just: [text\n"


def test_history_of_a_workflow_that_does_not_exist_says_so(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "history", "nope", "--json", *flags(folder))
    assert code != 0 and "no workflow 'nope'" in err and "--workflows DIR" in err
