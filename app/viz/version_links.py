"""Which workflow version a figure came from: the short hash, the version's name and message, and the editor's
`?workflow=NAME@VERSION` link that opens that version read-only (the Traces, Evaluate and Tune tabs)."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote

from app.viz.common import esc

SHORT_LEN = 12
"""Characters of a version hash shown (and enough for the link: a 12-character prefix is unambiguous in practice,
and the link carries the full hash anyway)."""
OPEN_RAN = "Open the version this ran"
NOT_RECORDED = "not in the version store"


def short_version(version: str | None) -> str:
    """The first SHORT_LEN characters of a version hash ("" for none)."""
    return str(version or "")[:SHORT_LEN]


def version_href(workflow: str, version: str) -> str:
    """The editor's deep link to one recorded version: `?workflow=NAME@VERSION` (relative to the studio page)."""
    return "?workflow=" + quote(f"{workflow}@{version}", safe="@")


def version_link(workflow: str, version: str, text: str = OPEN_RAN) -> str:
    """An <a> that opens the version read-only in the editor (a new tab: the figure stays where it is)."""
    return (f'<a class="mg-version-link" href="{esc(version_href(workflow, version))}" target="_blank" '
            f'rel="noopener">{esc(text)}</a>')


def version_cell(version: str | None, workflow: str | None, looked_up: bool = True) -> str:
    """A table cell's content: the short hash, a link when `workflow` names where the version is recorded, the
    plain hash titled "not in the version store" when it was `looked_up` and no save recorded it (not looked up:
    an offline report, the plain hash), "-" without a hash."""
    if not version:
        return '<span class="mg-muted">-</span>'
    code = f'<code title="{esc(version)}">{esc(short_version(version))}</code>'
    if workflow:
        return (f'<a class="mg-version-link" href="{esc(version_href(workflow, version))}" target="_blank" '
                f'rel="noopener" title="open version {esc(version)} of {esc(workflow)}">{code}</a>')
    if not looked_up:
        return code
    return f'<span class="mg-version-unrecorded" title="{esc(NOT_RECORDED)}: {esc(version)}">{code}</span>'


def version_html(version: str | None, recorded: Any, lead: str = "This run ran",
                 link_text: str = OPEN_RAN) -> str:
    """One line naming the version behind a figure (`lead`, e.g. "This run ran"): the short hash, the workflow it is
    recorded under with its name and message, and the link (`recorded`: an app.traces.versions.Version, or None
    when no save recorded it: said plainly, with no link)."""
    if not version:
        return (f'<div class="mg-viz mg-version mg-muted">{esc(lead)} no recorded version of its workflow (from '
                "before versions were kept).</div>")
    code = f'<code title="{esc(version)}">{esc(short_version(version))}</code>'
    if recorded is None:
        return (f'<div class="mg-viz mg-version">{esc(lead)} version {code}, which is {esc(NOT_RECORDED)}: no '
                "save recorded it (from before versions were kept, or a workflow never saved), so there is no "
                "version to open.</div>")
    facts = [f"of <b>{esc(recorded.workflow)}</b>"]
    if recorded.label:
        facts.append(f"“{esc(recorded.label)}”")
    if recorded.message:
        facts.append(esc(recorded.message))
    if recorded.created_at:
        facts.append("saved " + esc(time.strftime("%Y-%m-%d %H:%M", time.localtime(recorded.created_at))))
    return (f'<div class="mg-viz mg-version">{esc(lead)} version {code} {" · ".join(facts)} · '
            f"{version_link(recorded.workflow, recorded.version, link_text)}</div>")
