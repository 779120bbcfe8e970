"""Seeds of a node's draws, derived one way: `derive_seed` for a seed of its own (a node, a round, a group), and
`sample_seeds` for a run of draws (draw i of a set uses its base + i, the layout the sample cache keys on)."""

from __future__ import annotations

import hashlib

SEED_MASK = 0x7FFFFFFF


def derive_seed(run_seed: int, *parts: object) -> int:
    """A 31-bit seed that depends only on the run seed and the given parts (e.g. node id)."""
    digest = hashlib.sha256("\x1f".join(map(str, (run_seed, *parts))).encode()).digest()
    return int.from_bytes(digest[:4], "big") & SEED_MASK


def sample_seeds(seed: int, count: int, *parts: object, start: int = 0) -> list[int]:
    """The seeds of `count` draws: base + start + i, where the base is the node's `seed` itself (its draws
    numbered from 0: sample i of a sampler uses seed + i, so equal draws of two nodes share the sample cache) or,
    with `parts` (a round, a group), `derive_seed(seed, *parts)`, a set of draws of its own."""
    base = derive_seed(seed, *parts) if parts else seed
    return [base + start + i for i in range(count)]
