"""PRM scoring within its caps (issue 32, 2): steps per candidate and `step_tag` length capped (validated, share
caps), the chat layout linear in the steps, and a cancel obeyed while segmenting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.run.events import EventRecorder
from app.run.scheduler import Scheduler
from app.share.policy import SHARE_MAX_PRM_STEPS, SharePolicy, check_workflow_allowed
from app.workflow.validation import validate
from backends.base import CancelToken
from backends.fake import FakeBackend
from nodes.algorithms import prm
from nodes.registry import default_registry
from tests.nodes.test_prm import _step_fn, _workflow

REGISTRY = default_registry()


def _chatml(messages: list[dict[str, str]], gen: bool) -> str:
    text = "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in messages)
    return text + ("<|assistant|>\n" if gen else "")


def test_chat_layout_renders_a_bounded_number_of_messages_whatever_the_steps() -> None:
    rendered: list[int] = []

    def render(messages: list[dict[str, str]], gen: bool) -> str:
        rendered.append(len(messages))
        return _chatml(messages, gen)

    steps = [f"step {i}" for i in range(300)]
    segments = prm.chat_segments("Q?", steps, "+", render)
    assert "".join(segments) == _chatml(prm._conversation("Q?", steps, "+"), True)
    assert segments[0] == "<|user|>\nQ? step 0\n<|assistant|>\n"
    assert segments[7] == "+\n<|user|>\nstep 7\n<|assistant|>\n"
    assert sum(rendered) <= 2 * len(steps) + 10  # the old layout rendered 1 + 3 + 5 + ... messages: ~90,000


def test_a_template_whose_turns_differ_is_laid_out_turn_by_turn() -> None:
    def numbered(messages: list[dict[str, str]], gen: bool) -> str:  # each turn carries the user turn's number
        users = 0
        out = ""
        for m in messages:
            users += m["role"] == "user"
            out += f"[{m['role']} {users}]{m['content']}"
        return out

    segments = prm.chat_segments("Q?", ["a", "b", "c"], "+", numbered)
    assert segments == ["[user 1]Q? a", "[assistant 1]+[user 2]b", "[assistant 2]+[user 3]c"]


def test_steps_past_max_steps_are_the_last_step() -> None:
    assert prm.split_steps("a b c d e", " ", 3) == ["a", "b", "c d e"]
    assert prm.split_steps("a  b", " ", 3) == ["a", "b"]
    assert prm.split_steps("a b c", " ", 1) == ["a b c"]


@pytest.mark.parametrize(("params", "bad"), [
    ({"method": "prm", "step_tag": " ки" * 100}, "step_tag"),
    ({"method": "prm", "max_steps": prm.MAX_STEPS + 1}, "max_steps"),
    ({"method": "prm", "max_steps": 0}, "max_steps"),
])
def test_prm_caps_are_validated(params: dict[str, Any], bad: str) -> None:
    issues = [i for i in validate(_workflow(params), REGISTRY) if i.code == "bad_param"]
    assert any(f"'{bad}'" in i.message for i in issues), [i.message for i in issues]


def test_share_mode_caps_the_steps_per_candidate(tmp_path: Path) -> None:
    policy = SharePolicy.for_serving("127.0.0.1", force_share_mode=True, models_folder=tmp_path)
    over = check_workflow_allowed(_workflow({"method": "prm", "max_steps": SHARE_MAX_PRM_STEPS + 1}), policy)
    assert [i.code for i in over] == ["share_cap_exceeded"] and over[0].node_id == "v"
    assert check_workflow_allowed(_workflow({"method": "prm", "max_steps": SHARE_MAX_PRM_STEPS}), policy) == []


class CancellingRenderer(FakeBackend):
    """Cancels the run on its second chat rendering (a user pressing Stop while the layout is made) and counts the
    renderings made after that."""

    def __init__(self, cancel: CancelToken, **kw: Any) -> None:
        super().__init__(**kw)
        self.cancel_token = cancel
        self.renders = 0
        self.after_cancel = 0

    def render_prompt(self, prompt: Any, add_generation_prompt: bool = True) -> str:
        self.renders += 1
        if self.cancel_token.cancelled:
            self.after_cancel += 1
        if self.renders == 2:
            self.cancel_token.cancel("cancelled by the user")
        return super().render_prompt(prompt, add_generation_prompt)


def test_a_cancel_stops_the_chat_layout_of_many_steps() -> None:
    cancel = CancelToken()
    text = " ".join(f"s{i}" for i in range(400))
    backend = CancellingRenderer(cancel, replies=[text], step_fn=_step_fn)
    wf = _workflow({"method": "prm", "prm_format": "chat", "step_delimiter": " ", "max_steps": prm.MAX_STEPS})
    result = Scheduler(REGISTRY, lambda spec: backend).run(wf, seed=0, cancel=cancel,
                                                            observers=[EventRecorder()])
    assert result.status == "cancelled"
    assert backend.after_cancel <= 1  # the old layout rendered all 400 turns after the cancel
    assert not [c for c in backend.calls if c["kind"] == "steps"]
