"""Server-sent events: data lines, named events, comments, `[DONE]`, and a streaming response that cancels its
job when the client goes away."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

DONE = b"data: [DONE]\n\n"
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def data(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n\n"


def event(name: str, obj: Any) -> bytes:
    """A named event (`event:` line, then its data): the Responses and Messages APIs name every event."""
    return b"event: " + name.encode("utf-8") + b"\n" + data(obj)


def comment(text: str) -> bytes:
    """An SSE comment (clients ignore it; proxies see traffic and keep the connection open)."""
    return (": " + " ".join(text.split()) + "\n\n").encode("utf-8")


class EventStreamResponse(StreamingResponse):
    """text/event-stream from an async iterator; `on_close` runs however the stream ends (finished, failed,
    or the client disconnected)."""

    def __init__(self, content: AsyncIterator[bytes], on_close: Callable[[], None],
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(content, media_type="text/event-stream", headers={**HEADERS, **(headers or {})})
        self._on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._on_close()


class AnswerStream:
    """Turns decoded pieces into the text of a stripped answer as it grows: leading whitespace is dropped and
    trailing whitespace held back until more text follows, so the pieces add up to `text.strip()`."""

    def __init__(self) -> None:
        self.sent = ""
        self._held = ""

    def feed(self, piece: str) -> str:
        text = self._held + piece
        if not self.sent:
            text = text.lstrip()
        body = text.rstrip()
        self._held = text[len(body):]
        self.sent += body
        return body

    def finish(self, final: str) -> str | None:
        """What is left to send of `final` (None when the pieces sent are not a prefix of it)."""
        if not final.startswith(self.sent):
            return None
        rest = final[len(self.sent):]
        self.sent = final
        return rest
