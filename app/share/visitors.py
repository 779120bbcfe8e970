"""Share mode's visitor identities: a browser session within a bounded number per client address, else the address."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

MAX_SESSIONS_PER_ADDRESS = 16
"""Browser sessions one client address may hold as separate visitors; more sessions from it share one identity."""
SESSION_IDLE_S = 3600.0
"""A session unseen for this long no longer counts against its address."""
MAX_ADDRESSES = 10_000
"""Client addresses remembered at once (the least recently seen are forgotten first)."""
ADDRESS_PREFIX = "address:"


class VisitorIdentities:
    """Who a share-mode call is for. A Gradio session hash is chosen by the browser, so a caller can mint a new one
    per call for free; a client address cannot be minted that way. So: a call without a session is the visitor
    of its client address (the same one on every call, so per-visitor limits hold), and one address may hold at
    most `max_per_address` sessions as visitors of their own (recently seen); calls of further sessions from it
    are the address's visitor. Behind one address (a NAT, a proxy, Gradio's share tunnel) visitors beyond the
    bound share one identity: see docs/security.md."""

    def __init__(self, max_per_address: int = MAX_SESSIONS_PER_ADDRESS, idle_s: float = SESSION_IDLE_S,
                 max_addresses: int = MAX_ADDRESSES) -> None:
        self.max_per_address = max(0, max_per_address)
        self.idle_s = idle_s
        self.max_addresses = max(1, max_addresses)
        self._sessions: OrderedDict[str, OrderedDict[str, float]] = OrderedDict()
        """address -> {session: last seen}, both least recently seen first."""
        self._addresses: dict[str, str] = {}
        """session -> the address it was last seen from (its runs count against that address too)."""
        self._lock = threading.Lock()

    def identify(self, session: str | None, address: str | None, now: float | None = None) -> str:
        """The visitor id for a call from `address` carrying `session` (either may be missing)."""
        address = (address or "").strip() or "unknown"
        if not session or session.startswith(ADDRESS_PREFIX):  # a session may not pose as an address's visitor
            return ADDRESS_PREFIX + address
        now = time.monotonic() if now is None else now
        with self._lock:
            sessions = self._sessions.pop(address, None) or OrderedDict()
            self._sessions[address] = sessions  # most recently seen address last
            while len(self._sessions) > self.max_addresses:
                for forgotten in self._sessions.popitem(last=False)[1]:
                    self._addresses.pop(forgotten, None)
            for old, seen in list(sessions.items()):
                if now - seen <= self.idle_s:
                    break
                del sessions[old]
                self._addresses.pop(old, None)
            if session in sessions or len(sessions) < self.max_per_address:
                sessions.pop(session, None)
                sessions[session] = now
                self._addresses[session] = address
                return session
        return ADDRESS_PREFIX + address

    def address_of(self, visitor: str | None) -> str | None:
        """The client address a visitor's calls come from (None: not a share-mode visitor, or forgotten)."""
        if not visitor:
            return None
        if visitor.startswith(ADDRESS_PREFIX):
            return visitor[len(ADDRESS_PREFIX):]
        with self._lock:
            return self._addresses.get(visitor)

    def sessions_of(self, address: str) -> int:
        """Sessions `address` holds as visitors of their own now."""
        with self._lock:
            return len(self._sessions.get(address, ()))
