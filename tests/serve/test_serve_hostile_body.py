"""Bodies that once made /v1 answer 500 (issue 24, finding 8): a deeply nested JSON body, a number of more digits
than Python converts, a seed beyond 64 bits: each is a 400 in OpenAI's error shape."""

from __future__ import annotations

from typing import Any

import pytest

from tests.serve.conftest import ServeProcess


@pytest.fixture(scope="module")
def dry(serve_factory: Any) -> ServeProcess:
    return serve_factory("--dry-run")


def _post(server: ServeProcess, path: str, content: bytes) -> Any:
    with server.http() as http:
        return http.post(path, content=content, headers={"content-type": "application/json"})


CHAT = b'{"model": "chain_of_thought", "messages": [{"role": "user", "content": "What is 6 times 7?"}]'
BASES = {"/chat/completions": CHAT, "/completions": b'{"model": "chain_of_thought", "prompt": "What is 6 times 7?"'}


@pytest.mark.parametrize("path", ["/chat/completions", "/completions"])
@pytest.mark.parametrize(("body", "param", "words"), [
    (b"[" * 50_000 + b"]" * 50_000, None, "nested too deeply"),
    (b'{"model": "x", "inputs": ' + b'{"a": ' * 5000 + b"1" + b"}" * 5000 + b"}", None, "nested too deeply"),
    (b'{BASE}, "seed": ' + b"9" * 4400 + b"}", None, "too many digits"),
    (b'{BASE}, "seed": ' + b"9" * 4000 + b"}", "seed", "a number of 4000 digits"),
    (b'{BASE}, "seed": 9223372036854775808}', "seed", "64-bit"),
])
def test_hostile_bodies_are_400s(dry: ServeProcess, path: str, body: bytes, param: str | None, words: str) -> None:
    reply = _post(dry, path, body.replace(b"{BASE}", BASES[path]))
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert words in error["message"] and error["param"] == param
    assert error["code"] in ("invalid_json", "invalid_value", "invalid_type"), error


def test_a_64_bit_seed_still_runs(dry: ServeProcess) -> None:
    reply = _post(dry, "/chat/completions", CHAT + b', "seed": 9223372036854775807}')
    assert reply.status_code == 200, reply.text
