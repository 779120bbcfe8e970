"""The semantic diff (issue 50): crafted pairs (a param change, a rewired edge, a renamed node, a retyped node, inputs
and outputs, a changed sub-workflow nested under its node), every pair of consecutive example versions in this
repository's git history, and `metagen diff FILE` as git's textconv driver in a temporary repository."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from app.workflow.diff import canonical_lines, diff_lines, diff_workflows
from app.workflow.spec import load_workflow_text

ROOT = Path(__file__).resolve().parents[2]

BASE = """\
version: 1
name: sc
inputs:
  question: {type: text, default: 'What is 3 + 4?'}
nodes:
- id: think
  kind: sampler
  params: {prompt: '{question}', n: 8, temperature: 0.7}
  inputs: {question: inputs.question}
- id: vote
  kind: voter
  params: {method: majority}
  inputs: {candidates: think.candidates}
outputs: {answer: vote.answer}
"""


def wf(text: str = BASE):  # type: ignore[no-untyped-def]
    return load_workflow_text(text)


def test_identical_workflows_are_the_same_and_layout_only_is_meta() -> None:
    assert diff_workflows(wf(), wf()) == {"same": True}
    moved = wf(BASE + "layout: {think: [10, 20]}\n")
    d = diff_workflows(wf(), moved)
    assert d["same"] is True and d["meta"] == {"layout": {"changed": True}}


def test_a_param_change_is_old_to_new() -> None:
    d = diff_workflows(wf(), wf(BASE.replace("n: 8", "n: 16")))
    assert d["same"] is False
    assert d["params"] == [{"node": "think", "param": "n", "old": 8, "new": 16}]
    assert "nodes" not in d and "edges" not in d
    assert diff_lines(d) == ["~ think.n: 8 → 16"]


def test_a_rewired_edge_is_one_removed_and_one_added() -> None:
    rewired = BASE.replace("- id: vote", """- id: other
  kind: sampler
  params: {prompt: '{question}', n: 2}
  inputs: {question: inputs.question}
- id: vote""").replace("candidates: think.candidates", "candidates: other.candidates")
    d = diff_workflows(wf(), wf(rewired))
    assert d["nodes"] == {"added": [{"id": "other", "kind": "sampler"}]}
    assert d["edges"] == {"added": ["inputs.question -> other.question", "other.candidates -> vote.candidates"],
                          "removed": ["think.candidates -> vote.candidates"]}


def test_a_renamed_node_is_a_rename_not_a_replacement_and_its_wiring_is_unchanged() -> None:
    renamed = BASE.replace("id: think", "id: sample").replace("think.candidates", "sample.candidates")
    d = diff_workflows(wf(), wf(renamed))
    assert d == {"same": False, "nodes": {"renamed": [{"old": "think", "new": "sample"}]}}
    assert diff_lines(d) == ["~ node think renamed sample"]


def test_a_retyped_node_and_removed_nodes() -> None:
    retyped = BASE.replace("kind: voter", "kind: verifier").replace("{method: majority}", "{method: length}")
    d = diff_workflows(wf(), wf(retyped))
    assert d["nodes"]["retyped"] == [{"id": "vote", "old": "voter", "new": "verifier"}]
    assert "params" not in d  # a retyped node's params belong to another kind: not compared one by one
    lone = wf("version: 1\nname: x\nnodes:\n- id: t\n  kind: template\n  params: {template: hi}\noutputs: "
              "{answer: t.text}\n")
    d = diff_workflows(wf(), lone)
    assert {n["id"] for n in d["nodes"]["removed"]} == {"think", "vote"}
    assert d["nodes"]["added"] == [{"id": "t", "kind": "template"}]
    assert d["inputs"]["removed"] == {"question": {"type": "text", "default": "What is 3 + 4?", "description": ""}}
    assert d["outputs"]["changed"] == {"answer": {"old": "vote.answer", "new": "t.text"}}


PARENT = """\
version: 1
name: parent
inputs:
  draft: {type: text, default: 'x'}
nodes:
- id: w
  kind: workflow
  params: {workflow: leaf}
  inputs: {draft: inputs.draft}
outputs: {answer: w.answer}
"""
LEAF = """\
version: 1
name: leaf
inputs:
  draft: {type: text, default: 'x'}
nodes:
- id: t
  kind: template
  params: {template: '[{draft}]'}
  inputs: {draft: inputs.draft}
outputs: {answer: t.text}
"""


def test_a_sub_workflow_change_is_nested_under_its_node() -> None:
    d = diff_workflows(wf(PARENT), wf(PARENT), {"leaf": LEAF}, {"leaf": LEAF.replace("[{draft}]", "<{draft}>")})
    assert d["same"] is False and list(d) == ["same", "subworkflows"]
    inner = d["subworkflows"]["w"]
    assert inner["workflow"] == "leaf"
    assert inner["params"] == [{"node": "t", "param": "template", "old": "[{draft}]", "new": "<{draft}>"}]
    assert diff_lines(d) == ['~ node w (sub-workflow leaf):', '    ~ t.template: "[{draft}]" → "<{draft}>"']


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def _example_history(limit: int = 400) -> list[tuple[str, str, str]]:
    """(file, older text, newer text) of consecutive versions of each example workflow in git history: one
    `git log --follow` per file, every blob read by one `git cat-file --batch`."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs this repository's git history")
    chains: dict[str, list[str]] = {}
    for path in sorted((ROOT / "workflows").glob("*.yaml")):
        rel = path.relative_to(ROOT).as_posix()
        log = _git("log", "--follow", "--name-only", "--format=%x00%H", "--", rel, cwd=ROOT)
        specs = []
        for entry in log.split("\0")[1:]:
            rev, *names = entry.split()
            if names:
                specs.append(f"{rev}:{names[-1]}")
        chains[rel] = list(reversed(specs))
    wanted = [spec for specs in chains.values() for spec in specs]
    out = subprocess.run(["git", "cat-file", "--batch"], cwd=ROOT, input=("\n".join(wanted) + "\n").encode(),
                         capture_output=True, check=True).stdout
    texts: dict[str, str | None] = {}
    pos = 0
    for spec in wanted:
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        if header[-1] == b"missing":
            texts[spec], pos = None, end + 1
            continue
        size = int(header[2])
        texts[spec] = out[end + 1:end + 1 + size].decode("utf-8", errors="replace")
        pos = end + 1 + size + 1
    pairs: list[tuple[str, str, str]] = []
    for rel, specs in chains.items():
        versions = [t for t in (texts[s] for s in specs) if t is not None]
        pairs += [(rel, a, b) for a, b in itertools.pairwise(versions)]
    return pairs[:limit]


def test_every_consecutive_pair_of_example_versions_in_git_history() -> None:
    """Each pair either diffs to a description that names every run-relevant change, or to `same` exactly when
    the semantic hash did not change."""
    from app.workflow.problems import WorkflowError

    pairs = _example_history()
    assert pairs, "no example has two versions in git history"
    checked = 0
    for rel, old_text, new_text in pairs:
        try:
            old, new = load_workflow_text(old_text), load_workflow_text(new_text)
        except WorkflowError:
            continue  # a version of an older format (still read by nothing)
        d = diff_workflows(old, new)
        assert d["same"] == (old.semantic_hash() == new.semantic_hash()), (rel, d)
        if not d["same"]:
            assert diff_lines(d), rel
        checked += 1
    assert checked >= 10


def test_metagen_diff_is_a_git_textconv_driver(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("needs git")
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True,
                              env=env).stdout

    git("init", "-q")
    metagen = f"{sys.executable} -m app.cli diff"
    git("config", "diff.metagen.textconv", f"env PYTHONPATH={ROOT} {metagen}")
    git("config", "diff.metagen.cachetextconv", "true")  # each blob converted once (a metagen start each)
    (repo / ".gitattributes").write_text("*.yaml diff=metagen\n")
    (repo / "sc.yaml").write_text(BASE)
    git("add", ".")
    git("commit", "-qm", "one")
    (repo / "sc.yaml").write_text(BASE.replace("n: 8", "n: 16").replace("{method: majority}",
                                                                          "{method: majority}\n  model: main"))
    out = git("diff")
    assert "-  think.n = 8" in out and "+  think.n = 16" in out
    assert "+node vote (voter) model main" in out
    git("commit", "-qam", "two")
    log = git("log", "-p", "-1", "--format=%s")
    assert "+  think.n = 16" in log and "two" in log


def test_the_textconv_form_is_one_fact_per_line() -> None:
    lines = canonical_lines(wf(), {"leaf": LEAF})
    assert "node think (sampler)" in lines and "  think.n = 8" in lines
    assert "  vote.candidates <- think.candidates" in lines and "output answer <- vote.answer" in lines
    nested = canonical_lines(wf(PARENT), {"leaf": LEAF})
    assert "  w uses leaf:" in nested and '      t.template = "[{draft}]"' in nested
