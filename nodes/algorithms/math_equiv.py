"""Mathematical equivalence of answers (math-verify) in child processes with a time limit per item.

`MathChecker.equal(answer, reference)` says whether a model's answer (its last \\boxed{}, else its last LaTeX
or plain expression) equals the reference (LaTeX or plain text) up to sympy equivalence, so `\\frac{1}{2}`
equals `0.5`; `MathChecker.classes(answers)` groups answers into equivalence classes (for voting). The work
runs in `math_worker.py` children: a request past `timeout_s` kills its child (a fresh one starts for the next
request) and counts as *not equal*, so a pathological expression is graded wrong and never hangs anything.
A few children serve concurrent callers (an evaluation grades items from several threads).
"""

from __future__ import annotations

import atexit
import json
import logging
import queue
import subprocess
import sys
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

MATH_TIMEOUT_S = 5.0
"""Per item: how long one equivalence check may take before it is graded wrong."""
STARTUP_TIMEOUT_S = 120.0
"""How long a child may take to import sympy and math-verify (slow on a loaded machine)."""
WORKERS = 2
_WORKER_FILE = Path(__file__).with_name("math_worker.py")


class MathUnavailableError(RuntimeError):
    """math-verify cannot be imported by the worker; the message says how to install it."""


@dataclass(frozen=True)
class MathVerdict:
    """One check: equal or not, what was parsed on each side (for the grade's detail), and why it failed."""

    equal: bool
    got: str | None = None
    want: str | None = None
    problem: str = ""
    ungraded: str = ""
    """Why no check was made at all (the worker died): the grader failed, not the answer."""


class _Worker:
    """One child process and the thread that reads its replies."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-I", str(_WORKER_FILE)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self.replies: queue.Queue[str | None] = queue.Queue()
        self.died = False
        """The child ended on its own (a crash), as opposed to passing a time limit."""
        threading.Thread(target=self._read, name="math-verify-reader", daemon=True).start()
        ready = self._reply(STARTUP_TIMEOUT_S)
        if ready is None:
            self.close()
            raise MathUnavailableError("the math-verify worker did not start (timed out or crashed)")
        if "error" in ready:
            self.close()
            raise MathUnavailableError(str(ready["error"]))

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.replies.put(line)
        self.replies.put(None)

    def _reply(self, timeout_s: float) -> dict[str, Any] | None:
        try:
            line = self.replies.get(timeout=timeout_s)
        except queue.Empty:
            return None
        if not line:
            self.died = True
            return None
        return json.loads(line)

    def ask(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any] | None:
        """The reply, or None when the child passed the time limit or died (it is then closed)."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        except OSError:
            self.died = True
            self.close()
            return None
        reply = self._reply(timeout_s)
        if reply is None:
            self.close()
        return reply

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            log.warning("math-verify worker %s did not exit", self.proc.pid)


class MathChecker:
    """Equivalence checks served by up to `workers` children, started when first needed."""

    def __init__(self, timeout_s: float = MATH_TIMEOUT_S, workers: int = WORKERS) -> None:
        self.timeout_s = timeout_s
        self._idle: queue.Queue[_Worker | None] = queue.Queue()
        for _ in range(max(1, workers)):
            self._idle.put(None)  # a slot; its child starts on first use

    def _ask(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any] | None:
        worker = self._idle.get()
        try:
            if worker is None or not worker.alive:
                worker = _Worker()
            reply = worker.ask(request, timeout_s)
            if reply is None:
                if worker.died:
                    reply = {"died": f"the math-verify worker died (exit status {worker.proc.returncode})"}
                worker = None
            return reply
        finally:
            self._idle.put(worker if worker is not None and worker.alive else None)

    def equal(self, answer: str, reference: str) -> MathVerdict:
        """Whether `answer` (a model's text) equals `reference` mathematically; wrong past the time limit."""
        reply = self._ask({"op": "equal", "answer": answer, "reference": reference}, self.timeout_s)
        if reply is None:
            return MathVerdict(False, problem=f"the equivalence check passed its time limit of {self.timeout_s:g} s")
        if "died" in reply:
            return MathVerdict(False, problem=str(reply["died"]), ungraded=str(reply["died"]))
        if "failed" in reply:
            return MathVerdict(False, problem=str(reply["failed"]))
        return MathVerdict(bool(reply["equal"]), reply.get("got"), reply.get("want"))

    def classes(self, answers: list[str | None]) -> list[int | None]:
        """For each answer, the index of the first answer equivalent to it (None: no parsable answer). Past
        the time limit (`timeout_s` per answer), answers fall back to classes by identical text."""
        if not any(answers):
            return [None] * len(answers)
        reply = self._ask({"op": "classes", "answers": answers}, self.timeout_s * max(1, len(answers)))
        if reply is None or "classes" not in reply:
            log.warning("math equivalence classes fell back to identical text: %s",
                        "time limit" if reply is None else reply.get("failed") or reply.get("died"))
            return _text_classes(answers)
        return [None if c is None else int(c) for c in reply["classes"]]

    def close(self) -> None:
        while True:
            try:
                worker = self._idle.get_nowait()
            except queue.Empty:
                return
            if worker is not None:
                worker.close()


def _text_classes(answers: list[str | None]) -> list[int | None]:
    first: dict[str, int] = {}
    return [None if not a else first.setdefault(a.strip(), i) for i, a in enumerate(answers)]


@lru_cache(maxsize=1)
def default_checker() -> MathChecker:
    """The process's shared checker: its children import sympy once and serve every grade and vote."""
    checker = MathChecker()
    atexit.register(checker.close)
    return checker


def math_available() -> str | None:
    """None when math-verify can be imported here, else how to install it."""
    try:
        import math_verify  # noqa: F401
    except ImportError:
        return "the math metric needs math-verify: pip install math-verify"
    return None


def class_answers(answers: list[str | None], checker: MathChecker | None = None) -> list[str | None]:
    """Each answer replaced by the first answer of its equivalence class, so a vote over the result counts
    `1/2`, `0.5` and `\\frac{2}{4}` as one answer (written as the first of them)."""
    classes = (checker or default_checker()).classes(answers)
    return [None if c is None else answers[c] for c in classes]
