"""Workflow-in-URL payloads: round trip, size limits, tampering, and the three link kinds."""

from __future__ import annotations

import base64
import os
import zlib
from urllib.parse import parse_qs, urlsplit

import pytest

from app.share.deeplink import (
    MAX_PAYLOAD_CHARS,
    DeepLinkError,
    decode_payload,
    encode_workflow,
    payload_link,
    read_deep_link,
    run_link,
    workflow_from_payload,
    workflow_link,
)

YAML = """version: 1
name: tiny
inputs:
  question: {type: text, default: "What is 2 + 2?"}
nodes:
  - id: answer
    kind: generator
    params: {prompt: "{question}"}
    inputs: {question: inputs.question}
outputs:
  answer: answer.text
"""


def _raw_payload(data: bytes, version: str = "1") -> str:
    return f"{version}." + base64.urlsafe_b64encode(data).decode().rstrip("=")


def test_round_trip_and_url_safe() -> None:
    payload = encode_workflow(YAML)
    assert payload.startswith("1.")
    assert all(c.isalnum() or c in "._-" for c in payload)
    assert decode_payload(payload) == YAML
    wf = workflow_from_payload(payload)
    assert wf.name == "tiny" and [n.id for n in wf.nodes] == ["answer"]


def test_links_keep_other_query_params_and_replace_old_links() -> None:
    link = payload_link("http://127.0.0.1:7860/?__theme=dark&run=abc", YAML)
    query = parse_qs(urlsplit(link).query)
    assert query["__theme"] == ["dark"] and "run" not in query
    assert read_deep_link({k: v[0] for k, v in query.items()}).yaml_text == YAML
    assert workflow_link("http://h:1", "best_of_n") == "http://h:1/?workflow=best_of_n"
    assert run_link("https://x.gradio.live/", "r-123_ab") == "https://x.gradio.live/?run=r-123_ab"
    with pytest.raises(ValueError):
        workflow_link("http://h:1", "../etc/passwd")
    with pytest.raises(DeepLinkError):
        run_link("http://h:1", "'; drop table runs")


def test_oversized_workflows_are_refused_when_encoding() -> None:
    noise = base64.b64encode(os.urandom(20_000)).decode()  # incompressible
    with pytest.raises(DeepLinkError, match=r"too large|more than"):
        encode_workflow(YAML + f"description: {noise}\n")


@pytest.mark.parametrize(("payload", "message"), [
    ("", "empty"),
    ("1." + "A" * (MAX_PAYLOAD_CHARS + 10), "too large"),
    ("abc", "format"),
    ("9.eJwrSS0u0c3JzAMAGAwEGw", "format 9"),
    ("1.abc$def", "characters"),
    ("1.A", "damaged"),
])
def test_bad_payloads_give_clear_errors(payload: str, message: str) -> None:
    with pytest.raises(DeepLinkError, match=message):
        decode_payload(payload)


def test_tampered_payload_is_detected() -> None:
    payload = encode_workflow(YAML)
    i = len(payload) // 2
    flipped = payload[:i] + ("B" if payload[i] != "B" else "C") + payload[i + 1:]
    with pytest.raises(DeepLinkError, match=r"damaged|tampered|incomplete"):
        decode_payload(flipped)
    with pytest.raises(DeepLinkError, match=r"incomplete|damaged"):
        decode_payload(payload[:-6])


def test_zip_bomb_is_refused() -> None:
    bomb = _raw_payload(zlib.compress(b"a" * 5_000_000, 9))
    assert len(bomb) < MAX_PAYLOAD_CHARS
    with pytest.raises(DeepLinkError, match="unpacks to more than"):
        decode_payload(bomb)


def test_not_text_and_not_yaml() -> None:
    with pytest.raises(DeepLinkError, match="not text"):
        decode_payload(_raw_payload(zlib.compress(b"\xff\xfe\x00")))
    with pytest.raises(DeepLinkError, match="not a valid workflow"):
        workflow_from_payload(_raw_payload(zlib.compress(b"nodes: [unclosed")))


def test_read_deep_link_kinds_and_errors() -> None:
    assert read_deep_link({}) is None
    assert read_deep_link({"other": "1"}) is None
    assert read_deep_link({"workflow": "best_of_n"}).name == "best_of_n"
    assert read_deep_link({"run": "abc123"}).run_id == "abc123"
    link = read_deep_link({"wf": encode_workflow(YAML)})
    assert link.kind == "wf" and link.workflow is not None and link.error is None
    assert "names are not paths" in read_deep_link({"workflow": "../../etc/passwd"}).error
    assert "malformed" in read_deep_link({"run": "../x"}).error
    assert "damaged" in read_deep_link({"wf": "1.A"}).error
    assert "several" in read_deep_link({"run": "a", "workflow": "b"}).error
