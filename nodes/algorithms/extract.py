"""Answer extraction and canonicalisation: turn a completion into a comparable answer string (or None).

Extraction methods (the `extract` param of voters, verifiers and the adaptive sampler):
- `auto`: the first that finds something of boxed -> answer_line -> last_number -> full_text
  (a boxed/marked answer holding exactly one number, "Answer: 42 apples", is that number);
- `regex`: the first capture group (or the whole match) of the last match of `pattern`;
- `last_number`: the last number in the text (`1,000`, `-3.5`, `1e3`, `3/4`);
- `boxed`: the content of the last `\\boxed{...}` (nested braces allowed);
- `answer_line`: what follows the last "Answer:" / "answer is" marker, up to the end of its line;
- `first_line`: the first non-empty line;
- `full_text`: the whole completion;
- `keep`: the answer a node upstream already extracted (Candidate.answer), else no answer;
- `math`: a LaTeX answer: the last `\\boxed{...}`, else the last `$...$`, else the 'Answer:' line, else the
  last number, kept as written (no normalisation); voters and `exact` verifiers then compare answers by
  mathematical equivalence (`math_equiv`: `1/2`, `0.5` and `\\frac{2}{4}` are one answer).

Normalisation (`normalize` param): `auto` turns numbers into a canonical number and other text into
stripped, case-folded, NFKC-normalised text with collapsed spaces; `number` accepts numbers only
(anything else is *no answer*); `text` always uses the text form; `none` only strips whitespace.
Canonical numbers: `1,000` = `1000.0` = `1e3` = `$1000` -> "1000"; `0.50` -> "0.5"; `-0` -> "0".
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import deque
from dataclasses import dataclass
from fractions import Fraction

from nodes.algorithms.safe_regex import compile_pattern, pattern_problem
from nodes.base import Param

EXTRACT_METHODS = ("auto", "regex", "last_number", "boxed", "answer_line", "first_line", "full_text", "keep", "math")
MATH = "math"
NORMALIZE_MODES = ("auto", "number", "text", "none")

_NUMBER = r"[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+−]?\.\d+(?:[eE][-+]?\d+)?"
NUMBER_RE = re.compile(rf"(?<![\w./])(?:[-+−]?\d+/\d+(?![\w/])|(?:{_NUMBER})(?![\w/]))")
"""A number as people write it: optional sign, thousands commas, decimals, exponent, or a fraction 3/4."""
_ANSWER_MARKER = re.compile(r"(?:final\s+answer|answer)\s*(?:is|:|=)\s*", re.IGNORECASE)
_INLINE_MATH = re.compile(r"\$\$(.+?)\$\$|\$([^$]+?)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL)
_CURRENCY = "$€£¥₹"
_TRAILING_PUNCT = ".,;:!?。"


@dataclass(frozen=True)
class AnswerSpec:
    """How to extract and normalise answers; built from node params with `from_params`."""

    extract: str = "auto"
    pattern: str = ""
    normalize: str = "auto"

    @classmethod
    def from_params(cls, params: dict[str, object]) -> AnswerSpec:
        return cls(
            extract=str(params.get("extract") or "auto"),
            pattern=str(params.get("pattern") or ""),
            normalize=str(params.get("normalize") or "auto"),
        )

    def problems(self) -> list[tuple[str, str]]:
        """(param, message) for a spec that cannot work: unknown method, bad or missing regex."""
        out: list[tuple[str, str]] = []
        if self.extract not in EXTRACT_METHODS:
            out.append(("extract", f"unknown method {self.extract!r}; use one of {', '.join(EXTRACT_METHODS)}"))
        if self.normalize not in NORMALIZE_MODES:
            out.append(("normalize", f"unknown mode {self.normalize!r}; use one of {', '.join(NORMALIZE_MODES)}"))
        if self.extract == "regex":
            if not self.pattern:
                out.append(("pattern", "extract: regex needs a pattern, e.g. 'Answer:\\s*(-?\\d+)'"))
            else:
                problem = pattern_problem(self.pattern, multiline=True)
                if problem:
                    out.append(("pattern", problem))
        return out

    def answer(self, text: str, upstream: str | None = None) -> str | None:
        """The canonical answer of one completion, or None when there is none."""
        return extract_answer(text, self, upstream)


def parse_number(text: str) -> float | None:
    """A number written in `text` (the whole of it, after trimming currency, % and punctuation)."""
    s = unicodedata.normalize("NFKC", text).strip().replace("−", "-")
    s = s.strip(_TRAILING_PUNCT + " ").strip(_CURRENCY).strip()
    if s.startswith(("-", "+")) and len(s) > 1 and s[1] in _CURRENCY:
        s = s[0] + s[2:]
    s = s.rstrip("%").strip()
    if not s:
        return None
    if re.fullmatch(r"[-+]?\d{1,3}(,\d{3})+(\.\d+)?([eE][-+]?\d+)?", s):
        s = s.replace(",", "")
    try:  # a 5000-digit integer is beyond int()'s digit limit, its fraction beyond a float: not a number here
        if re.fullmatch(r"[-+]?\d+\s*/\s*\d+", s):
            num, den = (int(x) for x in s.split("/"))
            return float(Fraction(num, den)) if den else None
        if not re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", s):
            return None
        value = float(s)
    except (ValueError, OverflowError):
        return None
    return value if math.isfinite(value) else None


def canonical_number(value: float) -> str:
    """1000.0 -> "1000", 0.50 -> "0.5", -0.0 -> "0", 1e21 -> "1e+21" (12 significant digits)."""
    if value == 0:
        return "0"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return format(value, ".12g")


def normalize_text(text: str) -> str:
    """Stripped, NFKC-normalised, case-folded text with runs of whitespace collapsed and trailing
    sentence punctuation and wrapping quotes/markup removed."""
    s = unicodedata.normalize("NFKC", text).casefold()
    s = " ".join(s.split())
    s = s.strip("*_`\"'“”‘’ ")
    return s.rstrip(_TRAILING_PUNCT).strip()


def normalize_answer(raw: str | None, mode: str = "auto") -> str | None:
    """Canonical form of an extracted answer; None (no answer) for empty ones or, in `number` mode,
    for answers that are not numbers."""
    if raw is None:
        return None
    if mode == "none":
        stripped = raw.strip()
        return stripped or None
    if mode in ("auto", "number"):
        number = parse_number(raw)
        if number is not None:
            return canonical_number(number)
        if mode == "number":
            found = NUMBER_RE.findall(raw)
            if len(found) == 1:
                number = parse_number(found[0])
                return canonical_number(number) if number is not None else None
            return None
    text = normalize_text(raw)
    return text or None


def last_number(text: str) -> str | None:
    found = NUMBER_RE.findall(unicodedata.normalize("NFKC", text))
    return found[-1] if found else None


def boxed(text: str) -> str | None:
    """Content of the last \\boxed{...} (or \\fbox{...}), braces balanced."""
    start = max(text.rfind("\\boxed{"), text.rfind("\\fbox{"))
    if start < 0:
        return None
    i = text.index("{", start) + 1
    depth, j = 1, i
    while j < len(text) and depth:
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
        j += 1
    return text[i : j - 1] if depth == 0 else None


def answer_line(text: str) -> str | None:
    """What follows the last 'Answer:' / 'the answer is' marker, to the end of that line."""
    matches = list(_ANSWER_MARKER.finditer(text))
    if not matches:
        return None
    rest = text[matches[-1].end() :].split("\n", 1)[0].strip()
    return rest or None


def first_line(text: str) -> str | None:
    return next((line.strip() for line in text.splitlines() if line.strip()), None)


def regex_answer(text: str, pattern: str) -> str | None:
    """First capture group of the last match (the whole match when the pattern has no group)."""
    compiled = compile_pattern(pattern, multiline=True)  # RE2: linear time on any pattern a user writes
    last = deque(compiled.finditer(text), maxlen=1)
    if not last:
        return None
    m = last[0]
    if compiled.groups:
        return next((g for g in m.groups() if g is not None), None)
    return m.group(0)


def math_answer(text: str) -> str | None:
    """A LaTeX answer as written: the last \\boxed{}, else the last inline math, else the 'Answer:' line
    (its own inline math when it has some), else the last number."""
    found = boxed(text)
    if found is None:
        line = answer_line(text)
        if line is not None:
            text = line
        last = deque(_INLINE_MATH.finditer(text), maxlen=1)
        if last:
            found = next(g for g in last[0].groups() if g is not None)
        else:
            found = line if line is not None else last_number(text)
    found = found.strip().rstrip(".") if found is not None else None
    return found or None


def raw_answer(text: str, spec: AnswerSpec, upstream: str | None = None) -> str | None:
    """The extracted answer before normalisation."""
    method = spec.extract
    if method == MATH:
        return math_answer(text)
    if method == "keep":
        return upstream
    if method == "regex":
        return regex_answer(text, spec.pattern)
    if method == "last_number":
        return last_number(text)
    if method == "boxed":
        return boxed(text)
    if method == "answer_line":
        return answer_line(text)
    if method == "first_line":
        return first_line(text)
    if method == "full_text":
        return text
    # auto: the most explicit marker first; a marked answer holding exactly one number ("Answer: 42
    # apples") is that number, unless text normalisation was asked for
    for finder in (boxed, answer_line):
        found = finder(text)
        if found is not None:
            numbers = NUMBER_RE.findall(unicodedata.normalize("NFKC", found))
            if spec.normalize in ("auto", "number") and parse_number(found) is None and len(numbers) == 1:
                return numbers[0]
            return found
    number = last_number(text)
    if number is not None:
        return number
    return None if spec.normalize == "number" else text


def extract_answer(text: str, spec: AnswerSpec, upstream: str | None = None) -> str | None:
    """Extract then normalise; None means the completion has no extractable answer."""
    raw = raw_answer(text, spec, upstream)
    if spec.extract in ("keep", MATH):  # math answers are compared by equivalence, never as normalised text
        return raw
    return normalize_answer(raw, spec.normalize)


def answer_params(default_extract: str = "auto", show_if: tuple[str, tuple[str, ...]] | None = None,
                  ) -> tuple[Param, ...]:
    """The extract / pattern / normalize params, as voters, verifiers and samplers declare them."""
    return (
        Param("extract", "choice", default_extract,
              "How to find the answer in a completion (auto: \\boxed{}, then 'Answer:', then last number; "
              "math: a LaTeX answer compared by mathematical equivalence)",
              choices=EXTRACT_METHODS, show_if=show_if),
        Param("pattern", "str", "", "Regex whose first group is the answer, e.g. 'Answer:\\s*(-?\\d+)'",
              show_if=("extract", ("regex",))),
        Param("normalize", "choice", "auto",
              "auto: numbers canonical (1,000 = 1e3), text case-folded; number: numbers only; text; none",
              choices=NORMALIZE_MODES, show_if=show_if),
    )
