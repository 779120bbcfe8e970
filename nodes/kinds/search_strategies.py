"""The search node's DVTS, particle-filtering, MCTS and AB-MCTS strategies, over the node's own expand and score steps.

Each takes the running search (its tree, params, context, `_expand` and `_score`) and returns the chosen
tree node. Every round sends all its live branches to `_expand` together, which has them in flight at once,
so the engine decodes them as one batch. The arithmetic is in nodes/algorithms/search_strategies.py.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from typing import Any, Protocol

from nodes.algorithms.beam import SearchTree, TreeNode
from nodes.algorithms.search_strategies import (
    ScoreSummary,
    posterior_for,
    robust_pick,
    softmax,
    split_budget,
    systematic_resample,
    thompson_pick,
    uct_pick,
)
from nodes.base import NodeContext


class SearchState(Protocol):
    """What a strategy uses of the running search (nodes/kinds/search.py's _SearchRun)."""

    tree: SearchTree
    params: dict[str, Any]
    ctx: NodeContext

    def _expand(self, nodes: list[TreeNode], ks: list[int] | None = None, *,
                score: bool = True) -> list[TreeNode]: ...

    def _score(self, nodes: list[TreeNode]) -> None: ...


def strategy_problems(params: dict[str, Any]) -> list[tuple[str, str]]:
    """Cross-param checks of the strategies (the ranges are the params' own)."""
    out: list[tuple[str, str]] = []
    if params.get("strategy") == "dvts":
        width, k, subtrees = params.get("beam_width"), params.get("expand_k"), params.get("subtrees")
        if all(isinstance(v, int) and not isinstance(v, bool) for v in (width, k, subtrees)) \
                and subtrees > width * k:  # type: ignore[operator]
            out.append(("subtrees", f"{subtrees} subtrees cannot share beam_width x expand_k = {width * k} "  # type: ignore[operator]
                                    "samples per step: lower subtrees or raise beam_width / expand_k"))
    return out


def _exhausted(state: SearchState, node: TreeNode) -> bool:
    """Mark a node whose expansion gave only empty steps as complete (it wants to end there)."""
    if node.id != 0 and not node.terminal and not any(not c.pruned for c in state.tree.children(node.id)):
        node.terminal, node.finish = True, "exhausted"
        return True
    return False


# ------------------------------------------------------------------ DVTS


def run_dvts(state: SearchState) -> TreeNode | None:
    """Diverse verifier tree search (Beeching et al., search-and-learn): the beam_width x expand_k samples of a
    step are split over `subtrees` independent subtrees; each keeps only its best-scoring step (greedy) and
    expands it with its share at the next step. A subtree ends when its best step is terminal."""
    p = state.params
    widths = split_budget(int(p["beam_width"]) * int(p["expand_k"]), int(p["subtrees"]))
    tree, max_depth = state.tree, int(p["max_depth"])
    state._expand([tree.root], [sum(widths)])  # the first step of every subtree: one request from the root
    first = tree.children(0)
    start = 0
    for i, width in enumerate(widths):
        for child in first[start:start + width]:
            child.subtree = i
        start += width
    leaders: dict[int, TreeNode | None] = {}
    finals: list[TreeNode] = []
    for i in range(len(widths)):
        leaders[i] = _greedy(state, [c for c in first if c.subtree == i and not c.pruned], finals)
    depth = 1
    state.ctx.progress(depth, max_depth)
    while depth < max_depth:
        live = [(i, node) for i, node in leaders.items() if node is not None]
        if not live:
            break
        state._expand([node for _, node in live], [widths[i] for i, _ in live])
        depth += 1
        for i, node in live:
            kids = [c for c in tree.children(node.id) if not c.pruned]
            if not kids and _exhausted(state, node):
                finals.append(node)
                leaders[i] = None
                continue
            leaders[i] = _greedy(state, kids, finals)
        state.ctx.progress(depth, max_depth)
    finals += [n for n in leaders.values() if n is not None]
    return tree.best(finals)


def _greedy(state: SearchState, steps: list[TreeNode], finals: list[TreeNode]) -> TreeNode | None:
    """Keep the best step of a subtree (the others pruned); a terminal best ends the subtree (None)."""
    if not steps:
        return None
    best = state.tree.select(steps, 1)[0]
    if best.terminal:
        finals.append(best)
        return None
    return best


# ------------------------------------------------------------------ particle filtering


def run_particles(state: SearchState) -> TreeNode | None:
    """Particle filtering (Puri et al. 2025, its_hub): `particles` partial solutions; at each step every
    unfinished particle draws one next step (copies of one partial solution share one request), then the whole
    population (finished particles included) is resampled in proportion to softmax(score / resample_temperature)
    by systematic resampling. Ends when every particle is finished or at max_depth; the answer is the
    best-scoring finished particle."""
    p = state.params
    n, temperature, max_depth = int(p["particles"]), float(p["resample_temperature"]), int(p["max_depth"])
    tree = state.tree
    population: list[TreeNode] = [tree.root] * n
    for generation in range(1, max_depth + 1):
        live = Counter(node.id for node in population if not node.terminal)
        if not live:
            break
        parents = [tree.nodes[i] for i in live]
        children = state._expand(parents, [live[node.id] for node in parents])
        for child in children:
            child.generation = generation
        for node in parents:
            _exhausted(state, node)
        offspring = children + [node for node in parents if node.terminal]
        finished = [node for node in _distinct(population) if node.terminal and node.id != 0]
        pool = _distinct(offspring + finished)
        if not pool:
            break
        weights = softmax([node.score for node in pool], temperature)
        offset = random.Random(f"{state.ctx.seed}:particles:{generation}").random()
        drawn = [pool[i] for i in systematic_resample(weights, n, offset)]
        counts = Counter(node.id for node in drawn)
        for node in pool:  # a finished particle carried on keeps the copies its own round gave it
            count = counts.get(node.id, 0)
            if node.generation == generation:
                node.copies = count
            node.pruned = count == 0
        population = drawn
        state.ctx.progress(generation, max_depth)
    final = _distinct(population)
    return tree.best([node for node in final if node.terminal]) or tree.best(final)


def _distinct(nodes: list[TreeNode]) -> list[TreeNode]:
    """The nodes without repeats, in first-seen order (tree nodes are compared by id)."""
    seen: dict[int, TreeNode] = {}
    for node in nodes:
        seen.setdefault(node.id, node)
    return list(seen.values())


# ------------------------------------------------------------------ MCTS


def run_mcts(state: SearchState) -> TreeNode | None:
    """Monte Carlo tree search over steps (as in llm-reasoners' RAP): each simulation selects by UCT from the
    root down to a node with fewer than expand_k children, expands it with the missing ones (one request),
    rolls every new child out step by step to the end marker, the end of generation or max_depth (the rollouts
    of a simulation advance together, one batched round per step, and join the tree marked `rollout`), scores
    the finished solutions with the scorer and backs each value up its path. The answer follows the most
    visited child from the root down to a finished solution."""
    p = state.params
    simulations, c_explore, k = int(p["simulations"]), float(p["c_explore"]), int(p["expand_k"])
    tree = state.tree
    root = tree.root
    root.visits, root.value = 0, 0.0
    for sim in range(simulations):
        state.ctx.cancel.raise_if_cancelled()
        node = root
        while not node.terminal:
            kids = [c for c in tree.children(node.id) if not c.pruned]
            if len(kids) < k:
                break
            pick = uct_pick([(c.value or 0.0, c.visits or 0) for c in kids], node.visits or 0, c_explore)
            node = kids[pick]
        if node.terminal:
            if node.score is None:
                state._score([node])
            _backup(tree, node, node.score or 0.0)
        else:
            have = len([c for c in tree.children(node.id) if not c.pruned])
            new = state._expand([node], [k - have], score=False)
            if not new and _exhausted(state, node):
                new = [node]
            for c in new:
                c.visits, c.value = c.visits or 0, c.value or 0.0
            ends = _rollout(state, new)
            state._score([e for e in ends if e.score is None])
            for end in ends:
                _backup(tree, end, end.score or 0.0)
        state.ctx.progress(sim + 1, simulations)
    return _most_visited_path(tree)


def _rollout(state: SearchState, starts: list[TreeNode]) -> list[TreeNode]:
    """Continue each start with one sampled step at a time (all live rollouts in one round) until it finishes;
    returns the finished nodes."""
    ends = [s for s in starts if s.terminal]
    live = [s for s in starts if not s.terminal]
    while live:
        steps = state._expand(live, [1] * len(live), score=False)
        for step in steps:
            step.rollout, step.visits, step.value = True, 0, 0.0
        nxt: list[TreeNode] = []
        for node in live:
            kids = [c for c in state.tree.children(node.id) if not c.pruned]
            if not kids:
                _exhausted(state, node)
                ends.append(node)
                continue
            for kid in kids:
                (ends if kid.terminal else nxt).append(kid)
        live = nxt
    return ends


def _backup(tree: SearchTree, node: TreeNode, value: float) -> None:
    """Add one visit and the value to the node and each ancestor up to the root."""
    current: TreeNode | None = node
    while current is not None:
        current.visits = (current.visits or 0) + 1
        current.value = (current.value or 0.0) + value
        current = tree.nodes[current.parent] if current.parent is not None else None


def _most_visited_path(tree: SearchTree) -> TreeNode | None:
    node = tree.root
    while not node.terminal:
        kids = [c for c in tree.children(node.id) if not c.pruned and c.visits]
        if not kids:
            break
        node = kids[robust_pick([(c.value or 0.0, c.visits or 0) for c in kids])]
    if node.terminal and node.id != 0:
        return node
    finished = [n for n in tree.nodes if n.terminal and n.finish != "empty" and n.score is not None]
    return tree.best(finished) or (node if node.id != 0 else None)


# ------------------------------------------------------------------ AB-MCTS


def run_ab_mcts(state: SearchState) -> TreeNode | None:
    """Adaptive Branching MCTS (Inoue et al. 2025, "Wider or Deeper?"), AB-MCTS-A over steps: from the root down,
    Thompson sampling at each node chooses between generating a new child there (wider) and going into one of its
    open children, each option's posterior built from the scorer's scores (a new child's option: the scores of the
    children generated at the node; a child's: every score in its subtree). Generating below a node that had no
    children continues that partial solution (deeper). Each round makes expand_k such draws at once (parallel
    Thompson sampling: one batch for the engine), every draw one new step, until max_expansions steps are made.
    The answer is the best-scoring finished solution (else the best-scoring partial one)."""
    p = state.params
    budget, per_round = int(p["max_expansions"]), int(p["expand_k"])
    choice = str(p.get("ab_posterior") or "auto")
    tree = state.tree
    rng = random.Random(f"{state.ctx.seed}:ab_mcts")
    made_at: dict[int, ScoreSummary] = defaultdict(ScoreSummary)  # the scores of the children generated at a node
    reach: dict[int, ScoreSummary] = defaultdict(ScoreSummary)  # every score in a node's subtree: its visits, value
    seen: list[float] = []
    made = 0
    tree.root.visits, tree.root.value = 0, 0.0
    while made < budget:
        state.ctx.cancel.raise_if_cancelled()
        posterior = posterior_for(seen, choice)
        prior_mean = sum(seen) / len(seen) if seen else 0.5
        picks = [_ab_select(tree, made_at, reach, rng, posterior, prior_mean)
                 for _ in range(min(per_round, budget - made))]
        counts = Counter(node.id for node in picks)
        parents = [tree.nodes[i] for i in counts]
        had = {node.id: any(not c.pruned for c in tree.children(node.id)) for node in parents}
        first_new = len(tree.nodes)
        children = state._expand(parents, [counts[node.id] for node in parents])
        for made_now in tree.nodes[first_new:]:  # empty steps included (pruned, never scored)
            parent = tree.nodes[made_now.parent]  # type: ignore[index]
            made_now.branch = "deeper" if parent.id != 0 and not had[parent.id] else "wider"
            made_now.visits, made_now.value = 0, 0.0
        for child in children:
            if child.score is not None:  # an unscored step is no evidence (0.0 is the best log-likelihood there is)
                _ab_backup(tree, child, child.score, made_at, reach)
                seen.append(child.score)
        for node in parents:
            _exhausted(state, node)
        made += len(picks)
        state.ctx.progress(made, budget)
    finished = [n for n in tree.nodes if n.terminal and n.finish != "empty" and n.id != 0]
    return tree.best(finished) or tree.best([n for n in tree.nodes[1:] if not n.pruned])


def _ab_backup(tree: SearchTree, child: TreeNode, score: float, made_at: dict[int, ScoreSummary],
               reach: dict[int, ScoreSummary]) -> None:
    """A new step's score joins its parent's "new child" option and every ancestor's subtree; each node's visits
    and value are read off its subtree's summary (one source for both)."""
    made_at[child.parent].add(score)  # type: ignore[index]
    node: TreeNode | None = child
    while node is not None:
        summary = reach[node.id]
        summary.add(score)
        node.visits, node.value = summary.n, summary.total
        node = tree.nodes[node.parent] if node.parent is not None else None


def _ab_select(tree: SearchTree, made_at: dict[int, ScoreSummary], reach: dict[int, ScoreSummary],
               rng: random.Random, posterior: str, prior_mean: float) -> TreeNode:
    """Walk down from the root by Thompson sampling until the draw says "a new child here"; the node to expand."""
    node = tree.root
    while True:
        kids = [c for c in tree.children(node.id) if not c.pruned and not c.terminal]
        if not kids:
            return node
        options = [made_at[node.id]] + [reach[c.id] for c in kids]
        pick = thompson_pick(options, rng, posterior, prior_mean)
        if pick == 0:
            return node
        node = kids[pick - 1]
