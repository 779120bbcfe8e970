"""The fake model's script file (`--fake-script`): read from JSON or YAML, checked with clear errors, and answering
as FakeBackend's by_prompt / replies order says (a JSON-object reply sent as its JSON text)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.run.fake_script import FakeScriptError, load_fake_script, parse_fake_script
from backends.base import SamplingParams
from backends.fake import FakeBackend

CALL = {"tool_calls": [{"name": "Bash", "arguments": {"command": "echo MG-MARKER-$((4700+11))"}}]}


def reply(script_backend: FakeBackend, prompt: str, seed: int = 0) -> str:
    result = script_backend.generate(prompt, SamplingParams(max_tokens=200, seed=seed))
    return result.completions[0].text.strip()


def test_a_yaml_script_answers_by_prompt_first_then_its_replies(tmp_path: Path) -> None:
    path = tmp_path / "script.yaml"
    path.write_text("by_prompt:\n  MG-MARKER-4711: The command printed MG-MARKER-4711\n"
                    "replies:\n  - tool_calls:\n      - name: Bash\n"
                    "        arguments: {command: \"echo MG-MARKER-$((4700+11))\"}\n")
    backend = FakeBackend(**load_fake_script(path).backend_kwargs())
    assert json.loads(reply(backend, "run the check")) == CALL
    assert reply(backend, "tool result: MG-MARKER-4711") == "The command printed MG-MARKER-4711"


def test_a_json_script_with_replies_by_seed_and_in_turn(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"by_prompt": {"vote": ["A", "B"]}, "replies": ["one", "two"], "latency_s": 0,
                                "n_ctx": 65536}))
    script = load_fake_script(path)
    backend = FakeBackend(**script.backend_kwargs())
    assert backend.n_ctx == 65536 and FakeBackend().n_ctx is None
    assert [reply(backend, "vote", seed) for seed in (0, 1, 2)] == ["A", "B", "A"]
    assert [reply(backend, "x"), reply(backend, "x"), reply(backend, "x")] == ["one", "two", "one"]


@pytest.mark.parametrize(("data", "says"), [
    (["a"], "must be a mapping"),
    ({}, "scripts nothing"),
    ({"replys": ["a"]}, "unknown key(s) replys"),
    ({"replies": "a"}, "replies must be a list"),
    ({"replies": [3]}, "replies[0] must be a reply"),
    ({"by_prompt": ["a"]}, "by_prompt must map"),
    ({"by_prompt": {"k": []}}, "empty list"),
    ({"replies": ["a"], "latency_s": -1}, "latency_s must be a number of seconds"),
    ({"replies": ["a"], "n_ctx": "big"}, "n_ctx must be a whole number of tokens"),
])
def test_a_malformed_script_says_what_is_wrong(data: object, says: str) -> None:
    with pytest.raises(FakeScriptError) as err:
        parse_fake_script(data)
    assert says in str(err.value)


def test_an_unreadable_or_invalid_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FakeScriptError, match="cannot read the fake script"):
        load_fake_script(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(FakeScriptError, match="is not valid JSON"):
        load_fake_script(bad)


def test_a_dry_run_studio_answers_every_model_with_the_script(tmp_path: Path) -> None:
    from app.service.studio import StudioService
    from backends.base import ModelSpec

    script = parse_fake_script({"replies": ["scripted"], "n_ctx": 4096})
    service = StudioService(dry_run=True, workflows_dir=tmp_path / "workflows", examples_dir=tmp_path / "none",
                            trace_db=tmp_path / "traces.db", fake_script=script)
    try:
        backend = service.scheduler.provider(ModelSpec())
        assert reply(backend, "anything") == "scripted" and backend.n_ctx == 4096
    finally:
        service.close()
