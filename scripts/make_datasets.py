"""Generates the example evaluation datasets in datasets/ (arithmetic.jsonl, instructions.csv), deterministically,
and gives the hand-written code.jsonl its `public_tests` (each problem's first assert)."""

from __future__ import annotations

import argparse
import csv
import json
import logging
import random
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("make_datasets")

ROOT = Path(__file__).resolve().parent.parent
SEED = 20240611
PER_LEVEL = 20

NAMES = ("Mia", "Leo", "Ava", "Noah", "Zoe", "Omar", "Ines", "Ravi", "Hana", "Tom", "Lena", "Kofi", "Sara", "Ben")
ITEMS = ("apples", "stickers", "marbles", "books", "shells", "pencils", "cookies", "stamps", "coins", "cards")

Problem = tuple[str, int]


def _level1(rng: random.Random) -> Problem:
    """One addition or subtraction of small numbers."""
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    if rng.random() < 0.5:
        a, b = rng.randint(2, 15), rng.randint(2, 12)
        return f"{name} has {a} {item} and gets {b} more. How many {item} does {name} have now?", a + b
    a = rng.randint(8, 20)
    b = rng.randint(1, a - 1)
    return f"{name} had {a} {item} and gave {b} of them away. How many {item} does {name} have left?", a - b


def _level2(rng: random.Random) -> Problem:
    """Two operations (add then subtract, or subtract then add)."""
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    if rng.random() < 0.5:
        a, b = rng.randint(10, 40), rng.randint(5, 30)
        c = rng.randint(1, a + b - 1)
        return (f"{name} had {a} {item}, bought {b} more, then gave {c} to a friend. "
                f"How many {item} does {name} have now?", a + b - c)
    a = rng.randint(15, 50)
    b = rng.randint(1, a - 1)
    c = rng.randint(2, 25)
    return (f"A bus leaves the depot with {a} passengers. At the first stop {b} passengers get off "
            f"and {c} get on. How many passengers are on the bus now?", a - b + c)


def _level3(rng: random.Random) -> Problem:
    """A multiplication and an addition with bigger numbers."""
    a, b, c = rng.randint(12, 48), rng.randint(12, 36), rng.randint(10, 99)
    kind = rng.randrange(3)
    if kind == 0:
        return (f"A farm packs {a} boxes with {b} eggs in each box and has {c} loose eggs left over. "
                "How many eggs does the farm have in total?", a * b + c)
    if kind == 1:
        return (f"A school orders {a} packs of {b} pencils and {c} single pencils. "
                "How many pencils does the school order?", a * b + c)
    return (f"A theater has {a} rows of {b} seats and a balcony with {c} more seats. "
            "How many seats does the theater have?", a * b + c)


def arithmetic_rows(seed: int = SEED, per_level: int = PER_LEVEL) -> list[dict[str, object]]:
    """Word problems at levels 1-3, `per_level` of each, no question twice."""
    rng = random.Random(seed)
    makers: dict[int, Callable[[random.Random], Problem]] = {1: _level1, 2: _level2, 3: _level3}
    rows: list[dict[str, object]] = []
    seen: set[str] = set()
    for level, make in makers.items():
        count = 0
        while count < per_level:
            question, answer = make(rng)
            if question in seen:
                continue
            seen.add(question)
            rows.append({"question": question, "answer": str(answer), "level": level})
            count += 1
    return rows


INSTRUCTIONS: tuple[tuple[str, str, str], ...] = (
    ("Describe the ocean in at most 12 words.", "max_words", "12"),
    ("Explain what a battery does in no more than 20 words.", "max_words", "20"),
    ("Summarise the plot of a heist story in at most 25 words.", "max_words", "25"),
    ("Give one tip for learning to cook, in 15 words or fewer.", "max_words", "15"),
    ("Define photosynthesis in at most 30 words.", "max_words", "30"),
    ("Write one sentence about autumn that starts with the word 'Leaves'.", "starts_with", "Leaves"),
    ("Begin your reply with 'Dear reader' and then describe a rainy day in two sentences.", "starts_with",
     "Dear reader"),
    ("Start your answer with 'Step 1:' and explain how to boil an egg.", "starts_with", "Step 1:"),
    ("Write a short description of a desk lamp that begins with the word 'Introducing'.", "starts_with",
     "Introducing"),
    ("Write a two-sentence story about a dragon that includes the word 'lantern'.", "contains", "lantern"),
    ("Describe a city at night and use the word 'neon'.", "contains", "neon"),
    ("Explain why sleep matters and mention the word 'memory'.", "contains", "memory"),
    ("Write a haiku about snow using only lowercase letters.", "all_lowercase", ""),
    ("Describe your ideal breakfast in one sentence, all in lowercase.", "all_lowercase", ""),
    ("Name three fruits using lowercase letters only, with no capital letters at all.", "all_lowercase", ""),
    ("Write one sentence about trains that ends with a period.", "ends_with_period", ""),
    ("Describe the color blue to someone who has never seen it, and finish with a period.", "ends_with_period", ""),
    ("Give a one-sentence definition of gravity that ends with a period.", "ends_with_period", ""),
    ("List exactly 3 animals that live in the desert, one per line.", "number_of_lines", "3"),
    ("Write a poem of exactly 4 lines about the moon.", "number_of_lines", "4"),
    ("Give exactly 5 words that rhyme with 'cat', one per line.", "number_of_lines", "5"),
    ("Describe a busy market without using any commas.", "no_commas", ""),
    ("Explain how a bicycle works in two sentences without using commas.", "no_commas", ""),
    ("Write a short note to a neighbour about a lost cat and do not use any commas.", "no_commas", ""),
)


def write_arithmetic(path: Path) -> int:
    rows = arithmetic_rows()
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    path.write_text(text, encoding="utf-8", newline="\n")
    return len(rows)


ARITHMETIC_META = """\
# How arithmetic.jsonl is graded when no metric is given (`metagen eval --data arithmetic`, the Evaluate tab):
# the answers are numbers, so "12" and "12.0" are both right. See app/eval/dataset_meta.py.
metric: number
"""


def write_instructions(path: Path) -> int:
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(("prompt", "check", "arg"))
        writer.writerows(INSTRUCTIONS)
    return len(INSTRUCTIONS)


def public_tests(tests: str) -> str:
    """The examples a workflow may see: the first assert of the hidden tests (the `tests` metric grades with all)."""
    return next((line for line in tests.splitlines() if line.strip().startswith("assert ")), "")


def write_code_public_tests(source: Path, path: Path) -> int:
    """code.jsonl (hand-written) with each row's `public_tests` set from its `tests`; returns the row count."""
    rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    out = []
    for row in rows:
        made = {k: v for k, v in row.items() if k != "public_tests"}
        ordered = {}
        for key, value in made.items():
            ordered[key] = value
            if key == "tests":
                ordered["public_tests"] = public_tests(str(value))
        out.append(json.dumps(ordered, ensure_ascii=False))
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return len(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT / "datasets", help="folder to write into")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args.out.mkdir(parents=True, exist_ok=True)
    n = write_arithmetic(args.out / "arithmetic.jsonl")
    log.info("wrote %s (%d rows)", args.out / "arithmetic.jsonl", n)
    (args.out / "arithmetic.meta.yaml").write_text(ARITHMETIC_META, encoding="utf-8", newline="\n")
    n = write_instructions(args.out / "instructions.csv")
    log.info("wrote %s (%d rows)", args.out / "instructions.csv", n)
    n = write_code_public_tests(ROOT / "datasets" / "code.jsonl", args.out / "code.jsonl")
    log.info("wrote %s (%d rows, public_tests from each row's first assert)", args.out / "code.jsonl", n)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
