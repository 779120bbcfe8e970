"""Grammar sampling in a child process: it draws what llama.cpp's own chain draws, and an ambiguous grammar
(issue 24, finding 1) is stopped by cancel, by the run's time cap and by the per-token limit instead of holding
the engine."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import yaml

from backends.base import BackendError, CancelledError, CancelToken, SamplingParams
from backends.grammar.grammar_constraints import grammar_for
from backends.llama.models.bundled import bundled_model_path
from backends.llama.worker import grammar_worker
from backends.llama.worker.sampling_chain import SequenceSampler
from tests.fuzz.strategies import ISSUE_24_DELAYED, ISSUE_24_GRAMMAR

pytestmark = pytest.mark.model

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.dumps({"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"}},
                     "required": ["name", "n"]})


def _vocab() -> tuple[object, object]:
    import llama_cpp.llama_cpp as lib

    params = lib.llama_model_default_params()
    params.vocab_only = True
    model = lib.llama_model_load_from_file(str(bundled_model_path()).encode(), params)
    return lib, model


def test_the_child_masks_exactly_what_the_in_process_chain_draws_from() -> None:
    """Same logits, same seed: masking in the child then drawing without the grammar picks the token that
    llama.cpp's chain with the grammar in it picks, step after step."""
    lib, model = _vocab()
    vocab = lib.llama_model_get_vocab(model)
    n_vocab = int(lib.llama_vocab_n_tokens(vocab))
    grammar = grammar_for(SamplingParams(json_schema=SCHEMA))
    assert grammar is not None
    params = SamplingParams(temperature=1.0, top_k=0)
    rng = np.random.default_rng(5)
    worker = grammar_worker.GrammarWorker(bundled_model_path())
    try:
        worker.wait_ready(lambda: None)
        worker.new(0, grammar, lambda: None)
        inside = SequenceSampler(lib, vocab, params, 9, grammar)
        outside = SequenceSampler(lib, vocab, params, 9, None)
        tokens = []
        for _ in range(12):
            logits = rng.normal(0, 3, n_vocab).astype(np.float32)
            expected = inside.sample_logits(logits.copy())
            allowed = worker.allowed(0, n_vocab, lambda: None)
            assert allowed[expected]
            drawn = outside.sample_logits(np.where(allowed, logits, -np.inf).astype(np.float32))
            assert drawn == expected
            worker.accept(0, drawn)
            tokens.append(drawn)
        assert len(set(tokens)) > 1
        inside.free()
        outside.free()
    finally:
        worker.kill()
        lib.llama_model_free(model)


def _engine():  # a fresh engine: these tests kill grammar children and must not share one with others
    from tests.backends.test_engine_sampling import small_engine

    return small_engine(n_seq_max=4)


def test_cancel_stops_an_exploding_grammar_inside_the_grammar_work_and_the_engine_goes_on() -> None:
    """The issue's rules behind a fixed prefix (which the checker's simulation does not reach)."""
    engine = _engine()
    try:
        cancel = CancelToken()
        timer = threading.Timer(1.0, cancel.cancel, args=("the test's cap",))
        timer.start()
        params = SamplingParams(max_tokens=40, temperature=1.0, seed=1, grammar=ISSUE_24_DELAYED)
        with pytest.raises(CancelledError, match="the test's cap"):
            engine.generate("Write letters:", params, n=2, cancel=cancel)
        timer.cancel()
        after = engine.generate("Answer yes or no:", SamplingParams(max_tokens=4, grammar='root ::= "yes" | "no"'))
        assert after.completions[0].text in ("yes", "no")
        assert engine.engine.stats["cancelled"] >= 1
    finally:
        engine.close()


def test_the_per_token_limit_fails_the_sample_with_a_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without any cap, the grammar's work on one token is bounded: a clear error, and no child left behind."""
    monkeypatch.setattr(grammar_worker, "GRAMMAR_STEP_LIMIT_S", 0.5)
    engine = _engine()
    try:
        params = SamplingParams(max_tokens=40, temperature=1.0, seed=1, grammar=ISSUE_24_DELAYED)
        with pytest.raises(BackendError, match="too ambiguous") as caught:
            engine.generate([{"role": "user", "content": "Write letters."}], params, n=4)
        assert "begin with different text" in str(caught.value)
        idle = list(engine.engine.grammar_pool._idle)
    finally:
        engine.close()
    assert all(not worker.alive for worker in idle)


@pytest.mark.parametrize("grammar", [ISSUE_24_GRAMMAR, ISSUE_24_DELAYED], ids=["exact", "delayed"])
def test_the_issue_workflow_is_refused_or_ends_at_its_cap(tmp_path: Path, grammar: str) -> None:
    """The grammar of the issue on a generator (max_tokens 40, temperature 1) under a 3 s cap: refused at
    validation (bad_grammar), or the run ends by its budget (or fails / finishes cleanly); the subprocess timeout
    is only a hang guard."""
    workflow = {
        "version": 1, "name": "ambiguous-grammar", "models": {"main": {"source": "bundled"}},
        "nodes": [{"id": "gen", "kind": "generator", "model": "main",
                   "params": {"prompt": "Write letters.", "temperature": 1.0, "max_tokens": 40,
                              "grammar": grammar}}],
        "outputs": {"text": "gen.text"},
    }
    path = tmp_path / "ambiguous.yaml"
    path.write_text(yaml.safe_dump(workflow, sort_keys=False))
    done = subprocess.run([sys.executable, "-m", "app.cli.main", "run", str(path), "--max-seconds", "3", "--json",
                           "--no-trace", "-q"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    if grammar == ISSUE_24_GRAMMAR:  # the checker simulates llama.cpp's parse stacks and sees them multiply
        assert done.returncode == 2 and "bad_grammar" in done.stderr and "too ambiguous" in done.stderr, done.stderr
        return
    result = json.loads(done.stdout)
    assert result["status"] in ("budget_exceeded", "succeeded", "failed"), result
    if result["status"] == "failed":
        assert "too ambiguous" in result["error"]


def test_grammar_requests_beyond_the_process_cap_wait_their_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grammar_worker, "MAX_WORKERS", 2)
    leased: list[int] = []
    lease = grammar_worker.GrammarPool.lease

    def counting_lease(pool: grammar_worker.GrammarPool, cancelled: object) -> grammar_worker.GrammarWorker:
        worker = lease(pool, cancelled)  # type: ignore[arg-type]
        leased.append(pool.leased)
        return worker

    monkeypatch.setattr(grammar_worker.GrammarPool, "lease", counting_lease)
    engine = _engine()
    answers: list[str] = []
    try:
        def ask(i: int) -> None:
            params = SamplingParams(max_tokens=6, temperature=1.0, seed=i, grammar='root ::= ("yes" | "no")+')
            answers.append(engine.generate(f"Question {i}: yes or no?", params).completions[0].text)

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(5)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        pool = engine.engine.grammar_pool
        assert len(answers) == 5, answers
        assert all(re.fullmatch(r"(yes|no)*(y|ye|n)?", a) for a in answers), answers  # max_tokens may cut a word
        assert len(leased) == 5 and max(leased) <= 2 and pool.leased == 0
    finally:
        engine.close()


def test_a_request_thread_starts_the_grammar_process_ahead_of_the_engine() -> None:
    pool = grammar_worker.GrammarPool(bundled_model_path())
    try:
        pool.prewarm()
        pool.prewarm()  # one idle is enough
        assert len(pool._idle) == 1 and pool._idle[0].alive and pool._idle[0].started
        ready = pool._idle[0]
        assert pool.lease(lambda: None) is ready and pool.leased == 1
        pool.give_back(ready)
        assert pool._idle == [ready] and pool.leased == 0
    finally:
        pool.close()
    assert not ready.alive


def test_other_requests_are_served_while_a_grammar_works(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine does not wait for a grammar process: a plain request finishes while an exploding grammar's
    request is still being worked on, which cancel then stops."""
    monkeypatch.setattr(grammar_worker, "GRAMMAR_STEP_LIMIT_S", 60.0)
    engine = _engine()
    cancel = CancelToken()
    past_prefix = threading.Event()
    outcome: list[BaseException] = []

    def on_token(index: int, text: str) -> None:
        if "x" in text:
            past_prefix.set()

    def stuck() -> None:
        params = SamplingParams(max_tokens=40, temperature=1.0, seed=1, grammar=ISSUE_24_DELAYED)
        try:
            engine.generate([{"role": "user", "content": "Write letters."}], params, n=4, on_token=on_token,
                            cancel=cancel)
        except BaseException as exc:  # handed to the test's thread
            outcome.append(exc)

    worker = threading.Thread(target=stuck)
    try:
        worker.start()
        assert past_prefix.wait(120)
        worker.join(1.0)  # into the ambiguous part
        plain = engine.generate("The capital of France is", SamplingParams(max_tokens=8, seed=2))
        assert plain.completions[0].completion_tokens > 0
        assert worker.is_alive() and not outcome  # the grammar request is still at work
        cancel.cancel("the test is over")
        worker.join(60)
        assert not worker.is_alive() and isinstance(outcome[0], CancelledError)
    finally:
        cancel.cancel("the test is over")
        engine.close()
