"""CancelToken.on_cancel: what relays a cancel to an engine worker process is called once, at once when the token is
already cancelled, never after it was removed."""

from __future__ import annotations

import threading

from backends.base import CancelToken


def test_a_callback_runs_once_when_the_token_is_cancelled() -> None:
    token = CancelToken()
    calls: list[str] = []
    token.on_cancel(lambda: calls.append(token.reason))
    assert calls == []
    token.cancel("stop")
    token.cancel("again")
    assert calls == ["stop"]


def test_registering_on_a_cancelled_token_calls_at_once_and_removed_callbacks_stay_silent() -> None:
    token = CancelToken()
    token.cancel("done")
    calls: list[int] = []
    token.on_cancel(lambda: calls.append(1))
    assert calls == [1]
    other = CancelToken()
    remove = other.on_cancel(lambda: calls.append(2))
    remove()
    other.cancel()
    assert calls == [1]


def test_racing_cancel_and_register_call_each_callback_exactly_once() -> None:
    for _ in range(200):
        token = CancelToken()
        calls: list[int] = []
        canceller = threading.Thread(target=token.cancel)
        canceller.start()
        token.on_cancel(lambda calls=calls: calls.append(1))
        canceller.join()
        assert calls == [1]
