"""One client address cannot fill the run queue by minting session ids (issue 32, finding 9: 5 session ids from
one client got 9 runs accepted and the next visitor was refused): its sessions together have a bound."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from app.share.policy import runs_per_address
from tests.share.test_share_visitors import WF, _fns, _service


def _from(session: str, host: str) -> Any:
    return SimpleNamespace(session_hash=session, client=SimpleNamespace(host=host), headers={})


def test_five_sessions_of_one_address_leave_room_for_others(tmp_path: Path) -> None:
    release = threading.Event()
    service = _service(tmp_path, release)
    fns = _fns(service)
    limit = runs_per_address(service.policy)
    assert limit is not None and limit < service.policy.max_queue + service.policy.max_concurrent_runs
    try:
        answers = [fns["mg_run"]({"workflow": WF}, request=_from(f"s{i}", "10.0.0.5"))
                   for i in range(5) for _ in range(2)]
        accepted = [a for a in answers if not a.get("error")]
        assert len(accepted) == limit, answers
        assert all("network address" in a["error"] for a in answers if a.get("error"))
        other = fns["mg_run"]({"workflow": WF}, request=_from("someone-else", "10.0.0.9"))
        assert not other.get("error"), other
    finally:
        release.set()
        for handle in list(service._runs.values()):
            if handle.thread is not None:
                handle.thread.join(30)
