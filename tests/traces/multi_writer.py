"""Subprocess of the multi-process test: runs a workflow a few times into a shared trace database."""

from __future__ import annotations

import sys

from app.run.providers import fake_provider
from app.run.scheduler import Scheduler
from app.traces import TraceStore
from app.workflow.spec import load_workflow_text
from nodes.registry import default_registry

WORKFLOW = """\
version: 1
name: multi
inputs:
  question: {type: text, default: "Name a colour."}
nodes:
  - id: think
    kind: sampler
    params: {n: 8, prompt: "{question}"}
    inputs: {question: inputs.question}
outputs:
  samples: think.candidates
"""


def main(db_path: str, tag: str, runs: int) -> None:
    store = TraceStore(db_path)
    scheduler = Scheduler(default_registry(), fake_provider(latency_s=0.02))
    for k in range(runs):
        scheduler.run(load_workflow_text(WORKFLOW), seed=k, observers=[store], run_id=f"{tag}-{k}", use_cache=False)
    store.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
