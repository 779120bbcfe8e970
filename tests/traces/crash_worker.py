"""Subprocess of the crash test: one quick run, then a chain that hangs at its second node and is killed."""

from __future__ import annotations

import sys
import time

from app.run.providers import fake_provider
from app.run.scheduler import Scheduler
from app.traces import TraceStore
from app.workflow.spec import load_workflow_text
from nodes.registry import default_registry

CHAIN = """\
version: 1
name: slow-chain
inputs:
  question: {type: text, default: "Why is the sky blue?"}
nodes:
  - id: draft
    kind: generator
    params: {prompt: "{question}"}
    inputs: {question: inputs.question}
  - id: critique
    kind: generator
    params: {prompt: "Critique: {draft}"}
    inputs: {draft: draft.text}
  - id: revise
    kind: generator
    params: {prompt: "Revise: {critique}"}
    inputs: {critique: critique.text}
outputs:
  answer: revise.text
"""


def hang_at_critique(prompt: str, seed: int) -> str:
    """The draft answers at once; the critique never returns (the test kills the process meanwhile)."""
    if "Critique:" in prompt:
        time.sleep(600)
    return f"reply to: {prompt[:40]}"


def main(db_path: str) -> None:
    store = TraceStore(db_path)
    workflow = load_workflow_text(CHAIN)
    quick = Scheduler(default_registry(), fake_provider()).run(workflow, observers=[store])
    sys.stdout.write(f"first {quick.run_id}\n")
    sys.stdout.flush()
    slow = Scheduler(default_registry(), fake_provider(reply_fn=hang_at_critique))
    slow.run(workflow, seed=1, observers=[store], run_id="doomed")
    sys.stdout.write("finished (the test should have killed this process)\n")


if __name__ == "__main__":
    main(sys.argv[1])
