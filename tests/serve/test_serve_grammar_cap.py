"""Ambiguous recursive JSON schemas through /v1 response_format under share mode's time cap (issue 24, finding 1):
one the checker sees multiply is a 400 before any model work; one behind a long fixed prefix (past what the
checker simulates) ends at the cap (or fails with the grammar named, or finishes); the server answers the next."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.serve.conftest import ServeProcess

pytestmark = pytest.mark.model

BRANCH = {"type": "array", "items": {"$ref": "#/definitions/t"}}
DEFINITIONS = {"t": {"anyOf": [BRANCH] * 5 + [{"type": "integer"}]}}
AMBIGUOUS = {"type": "object", "properties": {"v": {"$ref": "#/definitions/t"}}, "required": ["v"],
             "definitions": DEFINITIONS}
DELAYED = {"type": "object", "properties": {"preamble": {"const": "x" * 24}, "v": {"$ref": "#/definitions/t"}},
           "required": ["preamble", "v"], "definitions": DEFINITIONS}


def _body(model: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": "Nested lists of numbers, please."}],
            "max_tokens": 40, "temperature": 1.0, "n": 2, "seed": 1,
            "response_format": {"type": "json_schema", "json_schema": {"name": "t", "schema": schema}}}


@pytest.fixture(scope="module")
def capped(serve_factory: Any) -> ServeProcess:
    return serve_factory("--share-mode", "--cap-seconds", "2")


def test_an_ambiguous_schema_ends_at_the_cap_and_the_server_goes_on(capped: ServeProcess) -> None:
    with capped.http() as http:
        model = next(m["id"] for m in http.get("/models").json()["data"] if m["id"].endswith(".gguf"))
        refused = http.post("/chat/completions", json=_body(model, AMBIGUOUS))
        assert refused.status_code == 400 and "too ambiguous" in refused.json()["error"]["message"], refused.text
        assert refused.json()["error"]["param"] == "response_format"
        reply = http.post("/chat/completions", json=_body(model, DELAYED))
        assert reply.status_code in (200, 400, 503), reply.text
        if reply.status_code == 503:
            assert "cap of 2 s" in reply.json()["error"]["message"]
        elif reply.status_code == 400:
            assert "too ambiguous" in reply.json()["error"]["message"]
        else:  # finished within the cap: JSON, unless max_tokens cut it (as on an AVX2-only EPYC, fast enough here)
            for choice in reply.json()["choices"]:
                if choice["finish_reason"] != "length":
                    assert json.loads(choice["message"]["content"]), choice
                else:
                    assert choice["message"]["content"].lstrip().startswith("{"), choice
        after = http.post("/chat/completions", json={"model": model, "max_tokens": 4, "messages": [
            {"role": "user", "content": "Say yes."}]})
        assert after.status_code == 200, after.text
