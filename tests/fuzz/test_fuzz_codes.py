"""The fuzz targets' set of known issue codes names every code the source can report (and nothing else)."""

from __future__ import annotations

from pathlib import Path

from tests.fuzz.targets import KNOWN_CODES, SOURCE_CODE_RE

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [*(ROOT / "app").rglob("*.py"), *(ROOT / "nodes").rglob("*.py")]


def test_known_codes_are_the_codes_in_the_source() -> None:
    in_source = {code for path in SOURCES for code in SOURCE_CODE_RE.findall(path.read_text(encoding="utf-8"))}
    assert in_source - KNOWN_CODES == set(), "add the new issue codes to tests/fuzz/targets.py KNOWN_CODES"
    assert KNOWN_CODES - in_source == set(), "issue codes no longer in the source"
