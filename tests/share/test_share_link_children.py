"""Share links carry the sub-workflows their workflow needs: made, opened, checked like the parent (the share
policy, size caps, names only), used by that page's checks and runs before the folder's, never written there."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from app.service.errors import UserError
from app.service.studio import StudioService
from app.share.deeplink import (
    MAX_PAYLOAD_CHARS,
    DeepLinkError,
    decode_bundle,
    decode_payload,
    encode_workflow,
    read_deep_link,
)
from app.ui.editor_page import mg_parse_yaml, mg_run
from app.ui.share_links import sl_make_links, sl_open_link
from tests.studio_fixtures import studio_service

CHILD = """\
version: 1
name: refine
inputs:
  draft: {type: text}
nodes:
- id: revise
  kind: generator
  params: {prompt: 'LINKED revise {draft}', max_tokens: 16}
  inputs: {draft: inputs.draft}
outputs: {answer: revise.text}
"""

PARENT = """\
version: 1
name: parent
inputs:
  question: {type: text, default: 'What is 3+4?'}
nodes:
- id: sample
  kind: sampler
  params: {prompt: '{question}', n: 2, max_tokens: 16}
  inputs: {question: inputs.question}
- id: refine_each
  kind: workflow
  map: draft
  params: {workflow: refine}
  inputs: {draft: sample.candidates}
- id: pick
  kind: voter
  params: {method: majority}
  inputs: {candidates: refine_each.candidates}
outputs: {answer: pick.best}
"""

OLD_LINK_YAML = """\
version: 1
name: flat
nodes:
- id: gen
  kind: generator
  params: {prompt: 'hello', max_tokens: 8}
outputs: {answer: gen.text}
"""


def _service(tmp_path: Path, *, share: bool = True) -> StudioService:
    return studio_service(tmp_path, share=share, allowed_model=True,
                          reply=lambda prompt, i: next((w for w in ("LINKED", "LOCAL") if w in prompt), "4"))


def _payload(url: str) -> str:
    return parse_qs(urlsplit(url).query)["wf"][0]


def _linked_service(tmp_path: Path) -> tuple[StudioService, str]:
    """An owner's app whose folder has `refine`, and a link made from it for an unsaved parent."""
    owner = _service(tmp_path / "owner", share=False)
    (owner.workflows_dir / "refine.yaml").write_text(CHILD, encoding="utf-8")
    made = sl_make_links(owner, {"base": "http://example.org/", "yaml": PARENT, "dirty": True})
    assert made["kind"] == "wf" and "sub-workflow" in made["note"]
    return owner, made["url"]


def test_a_link_carries_its_children_and_runs_in_share_mode_before_the_folders(tmp_path: Path) -> None:
    _, url = _linked_service(tmp_path)
    text, children = decode_bundle(_payload(url))
    assert text == PARENT and set(children) == {"refine"}
    # the visitor's app has its own, different `refine`: the link's wins, for that page only
    service = _service(tmp_path / "shared")
    local = CHILD.replace("LINKED", "LOCAL")
    (service.workflows_dir / "refine.yaml").write_text(local, encoding="utf-8")
    before = sorted(p.name for p in service.workflows_dir.iterdir())
    opened = sl_open_link(service, {"query": {"wf": _payload(url)}})
    assert opened.get("error") is None and opened["children"] == children and opened["yaml"] == PARENT

    checked = mg_parse_yaml(service, {"text": opened["yaml"], "children": opened["children"]})
    assert checked["error"] is None and not [i for i in checked["issues"] if i["severity"] == "error"]
    started = mg_run(service, {"workflow": checked["workflow"], "inputs": {}, "origin": "link",
                               "children": opened["children"]})
    done = service.wait_run(started["run_id"], timeout=30)
    assert done["status"] == "succeeded", done
    assert "LINKED" in str(done["outputs"]["answer"])
    # another visitor's run of the same parent (no link children) uses the folder's child; nothing was written
    other = mg_run(service, {"workflow": checked["workflow"], "inputs": {}, "origin": "file"})
    assert "LOCAL" in str(service.wait_run(other["run_id"], timeout=30)["outputs"]["answer"])
    assert sorted(p.name for p in service.workflows_dir.iterdir()) == before
    assert (service.workflows_dir / "refine.yaml").read_text(encoding="utf-8") == local


def test_a_link_whose_child_is_invalid_is_refused_with_the_childs_problem(tmp_path: Path) -> None:
    service = _service(tmp_path)
    bad = CHILD.replace("kind: generator", "kind: no_such_kind")
    opened = sl_open_link(service, {"query": {"wf": encode_workflow(PARENT, {"refine": bad})}})
    assert "sub-workflow in the link is refused" in opened["error"] and "refine_each/revise" in opened["error"]
    # checked like the parent: the share policy refuses a model file path inside the child
    pathy = CHILD.replace("nodes:", "models:\n  main: {path: /etc/secret.gguf}\nnodes:", 1)
    opened = sl_open_link(service, {"query": {"wf": encode_workflow(PARENT, {"refine": pathy})}})
    assert "refused" in opened["error"] and "refine_each" in opened["error"]


@pytest.mark.parametrize("name", ["../refine", "/etc/refine", "sub/refine", "..", "~root"])
def test_children_are_carried_by_name_only(tmp_path: Path, name: str) -> None:
    with pytest.raises(DeepLinkError, match="by name only"):
        encode_workflow(PARENT, {name: CHILD})
    # a crafted link (or page) with a path as a child's name is refused too
    link = read_deep_link({"wf": _crafted({name: CHILD})})
    assert link is not None and link.error and "by name only" in link.error
    with pytest.raises(UserError, match="by name only"):
        mg_parse_yaml(_service(tmp_path), {"text": PARENT, "children": {name: CHILD}})


def _crafted(children: dict[str, Any], raw: bytes | None = None) -> str:
    import base64
    import json
    import zlib

    raw = raw if raw is not None else json.dumps({"workflow": PARENT, "children": children}).encode()
    return "2." + base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode().rstrip("=")


@pytest.mark.parametrize("raw", [b"[" * 200_000, b"not json", b'["a list"]', b'{"children": {}}',
                                 b'{"workflow": "x", "children": {"refine": 3}}', b'{"workflow": "x", "children": []}'])
def test_a_damaged_bundle_is_a_message_not_a_traceback(raw: bytes) -> None:
    link = read_deep_link({"wf": _crafted({}, raw)})
    assert link is not None and link.error and "link" in link.error


def test_a_parent_naming_its_child_by_a_path_gets_no_link(tmp_path: Path) -> None:
    owner = _service(tmp_path, share=False)
    sub = owner.workflows_dir / "sub"
    sub.mkdir()
    (sub / "refine.yaml").write_text(CHILD, encoding="utf-8")
    (owner.workflows_dir / "parent.yaml").write_text(PARENT.replace("workflow: refine", "workflow: sub/refine.yaml"))
    with pytest.raises(UserError, match="by name only"):
        sl_make_links(owner, {"base": "/", "yaml": (owner.workflows_dir / "parent.yaml").read_text(), "dirty": True})


def test_an_oversize_link_with_children_is_refused(tmp_path: Path) -> None:
    import random

    rng = random.Random(1)
    noise = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(2 * MAX_PAYLOAD_CHARS))
    with pytest.raises(DeepLinkError, match="more than"):
        encode_workflow(PARENT, {"refine": CHILD.replace("LINKED", noise)})
    owner = _service(tmp_path, share=False)
    (owner.workflows_dir / "refine.yaml").write_text(CHILD.replace("LINKED", noise), encoding="utf-8")
    with pytest.raises(UserError, match="more than"):
        sl_make_links(owner, {"base": "/", "yaml": PARENT, "dirty": True})
    too_long = _crafted({"refine": CHILD.replace("LINKED", noise * 2)})
    assert "too large" in str(read_deep_link({"wf": too_long}).error)  # type: ignore[union-attr]


def test_old_links_open_as_before(tmp_path: Path) -> None:
    payload = encode_workflow(OLD_LINK_YAML)
    assert payload.startswith("1.")  # a workflow without children still makes a version 1 link
    assert decode_payload(payload) == OLD_LINK_YAML and decode_bundle(payload) == (OLD_LINK_YAML, {})
    opened = sl_open_link(_service(tmp_path), {"query": {"wf": payload}})
    assert opened == {"kind": "wf", "yaml": OLD_LINK_YAML, "name": "flat"}
    # a payload made by the old encoder (before children existed): the same bytes decode the same
    import base64
    import zlib

    old = "1." + base64.urlsafe_b64encode(zlib.compress(OLD_LINK_YAML.encode(), 9)).decode().rstrip("=")
    assert old == payload and sl_open_link(_service(tmp_path), {"query": {"wf": old}}) == opened
