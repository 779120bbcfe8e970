"""Without namespaces (isolation `none`) a candidate's throw-away uid can write the host's /tmp, /var/tmp and
/dev/shm: whatever it leaves there is removed after its run, and nobody else's files are touched."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from nodes.algorithms.code_exec import ExecLimits, run_confined
from nodes.algorithms.code_leftovers import remove_uid_files


def test_a_runs_files_outside_its_scratch_folder_are_removed() -> None:
    if os.geteuid() != 0:
        pytest.skip("a throw-away uid is taken only as root")
    tag = uuid.uuid4().hex
    places = [f"{root}/mg-left-{tag}" for root in ("/tmp", "/var/tmp", "/dev/shm") if os.access(root, os.W_OK)]
    mine = Path(f"/tmp/mg-owner-{tag}")
    mine.write_text("the owner's", encoding="utf-8")
    program = "import os\n" + "".join(
        f"os.makedirs({p!r} + '/deep', exist_ok=True)\nopen({p!r} + '/deep/f', 'w').write('x')\n"
        f"open({p!r} + '.txt', 'w').write('x')\n" for p in places)
    result = run_confined(["-c", program], "", ExecLimits(timeout_s=5), isolate=False)
    try:
        assert result.returncode == 0, result.stderr
        left = [p for p in places for q in (p, p + ".txt") if os.path.exists(q)]
        assert left == [], f"the run's files outlived it: {left}"
        assert mine.read_text(encoding="utf-8") == "the owner's"
    finally:
        mine.unlink()


def test_only_the_uids_entries_go(tmp_path: Path) -> None:
    root = tmp_path / "shared"
    root.mkdir(mode=0o777)
    root.chmod(0o1777)
    (root / "other").write_text("kept", encoding="utf-8")
    open_dir = root / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    theirs = open_dir / "theirs"
    theirs.write_text("x", encoding="utf-8")
    uid = os.geteuid()
    if uid == 0:
        uid = 1_950_000_001
        os.chown(theirs, uid, uid)
        assert remove_uid_files(uid, (str(root),)) == 1
        assert not theirs.exists() and (root / "other").exists() and open_dir.exists()
    else:
        pytest.skip("chown to another uid needs root")
