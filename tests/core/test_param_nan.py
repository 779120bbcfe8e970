"""NaN float params are refused (`bad_param`): NaN passes every min/max comparison, and a NaN length_penalty or
diversity_penalty made every beam score NaN."""

from __future__ import annotations

import math

import pytest

from app.workflow.spec import load_workflow_text
from app.workflow.validation import validate
from nodes.registry import default_registry

WF = """version: 1
name: beams
nodes:
- id: s
  kind: sampler
  params: {{prompt: "Capital of France?", method: beam, n: 4, diverse_groups: 2, temperature: 0, {param}: {value}}}
outputs: {{c: s.candidates}}
"""


@pytest.mark.parametrize("param", ["length_penalty", "diversity_penalty"])
def test_nan_beam_params_are_bad_params(param: str) -> None:
    wf = load_workflow_text(WF.format(param=param, value=".nan"))
    assert math.isnan(wf.nodes[0].params[param])
    issues = [i for i in validate(wf, default_registry()) if i.code == "bad_param"]
    assert any(param in i.message and "NaN" in i.message for i in issues), issues


@pytest.mark.parametrize("param", ["length_penalty", "diversity_penalty"])
def test_finite_beam_params_still_pass(param: str) -> None:
    wf = load_workflow_text(WF.format(param=param, value="0.5"))
    assert not [i for i in validate(wf, default_registry()) if i.code == "bad_param"]
