"""The `search` kind: step-level tree search (beam, best-first, DVTS, particle filtering, MCTS, AB-MCTS) with a
process scorer.

Each expansion samples `expand_k` next steps of a partial solution (generation stops at the step
delimiter), each new partial solution is scored (llm_judge on "is it correct so far", likelihood,
regex, python, or none), and the best are kept. A sample that stops at the delimiter before writing
anything (the model wanted a blank line) is drawn once more after that delimiter (its `lead`).
A step containing the end marker, or one after which the model ends generation, finishes its
branch; `max_depth` bounds every branch. The prompt of every expansion is the rendered task
followed by the partial solution, so the engine's prefix cache serves the shared part.

DVTS, particle filtering, MCTS and AB-MCTS live in nodes/kinds/search_strategies.py; every strategy's expansion round
sends all its live branches to the engine at once, so they decode as one batch.

Trace event "tree" (SearchTree.to_json() plus): {"strategy", "delimiter", "expansions",
"answer": chosen solution text, "nodes": [{"id", "parent", "depth", "text", "lead", "score",
"pruned", "chosen", "terminal", "finish", and per strategy "subtree" | "generation", "copies" |
"visits", "value", "rollout", "branch"}], "chosen_path": [ids]}. Node 0 is the root (empty solution).
"""

from __future__ import annotations

import threading
from typing import Any

from backends.base import GenerateResult
from nodes.algorithms.beam import Frontier, SearchTree, TreeNode
from nodes.base import (
    CANDIDATES,
    JSON,
    TEXT,
    Candidate,
    CandidateSet,
    NodeContext,
    NodeKind,
    Param,
    Port,
    template_variables,
)
from nodes.decoding import build_prompt, decoding_params, decoding_problems, prompt_params, sampling_params
from nodes.kinds.search_strategies import run_ab_mcts, run_dvts, run_mcts, run_particles, strategy_problems
from nodes.scoring import RESERVED_VARS, prm_problems, regex_problems, score_texts, scoring_params
from nodes.seeds import sample_seeds

SCORERS = ("llm_judge", "likelihood", "regex", "python", "prm", "reward_model", "none")
"""prm scores a partial solution by its last step's P(good) (search-and-learn); reward_model by the reward of the
partial solution so far."""
STRATEGIES = ("beam", "best_first", "dvts", "particles", "mcts", "ab_mcts")
POSTERIORS = ("auto", "beta", "gaussian")
MAX_SAMPLES_PER_REQUEST = 32
"""Samples in one request (DVTS's first step draws beam_width x expand_k at once, up to 256; the engine runs at
most n_seq_max sequences, 64 by default)."""
DEFAULT_STEP_JUDGE = ("Problem: {problem}\nPartial solution:\n{partial}\n"
                      "Is every step so far correct? Reply Yes or No.")


def _scorer_show(methods: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    return ("scorer", methods)


class Search(NodeKind):
    """Beam / best-first search over reasoning steps, scored step by step."""

    kind = "search"
    reserved_vars = RESERVED_VARS
    title = "Tree search"
    category = "search"
    description = ("Step-level tree search: expand partial solutions with k sampled next steps, score them "
                   "with a process verifier, keep the best (beam or best-first) until an end marker or max depth.")
    outputs = (
        Port("text", TEXT, "The chosen solution (its steps joined by the delimiter)"),
        Port("candidates", CANDIDATES, "Every finished solution with its score; the chosen one is the winner"),
        Port("tree", JSON, "The whole search tree: nodes, scores, pruned branches, chosen path"),
    )
    params = (
        *prompt_params("{question}", description="The problem; {name} fills in the input wired as `name`"),
        Param("strategy", "choice", "beam", "beam: keep the best beam_width per depth; best_first: always "
              "expand the best partial solution; dvts: beam_width x expand_k split into independent greedy "
              "subtrees; particles: particle filtering (resample partial solutions by softmaxed score); "
              "mcts: Monte Carlo tree search (UCT, rollouts scored by the scorer); ab_mcts: adaptive branching MCTS "
              "(Thompson sampling chooses a new child, wider, or going into an existing one, deeper)",
              choices=STRATEGIES),
        Param("beam_width", "int", 2, "Partial solutions kept per depth (beam); with expand_k, the samples per "
              "step (dvts)", min=1, max=16, show_if=("strategy", ("beam", "dvts"))),
        Param("expand_k", "int", 2, "Next steps sampled per expansion (ab_mcts: Thompson draws per round, each "
              "one new step, decoded as one batch)", min=1, max=16,
              show_if=("strategy", ("beam", "best_first", "dvts", "mcts", "ab_mcts"))),
        Param("subtrees", "int", 2, "DVTS: independent subtrees sharing the beam_width x expand_k samples of "
              "each step; each keeps only its best step (greedy by score)", min=1, max=64,
              show_if=("strategy", ("dvts",))),
        Param("particles", "int", 4, "Particle filtering: partial solutions kept and resampled at each step",
              min=1, max=64, show_if=("strategy", ("particles",))),
        Param("resample_temperature", "float", 1.0, "Particle filtering: temperature of the softmax over "
              "scores that resampling draws from (lower = greedier; the node's `temperature` is the sampling "
              "temperature of the steps)", min=0.001, max=100.0, show_if=("strategy", ("particles",))),
        Param("simulations", "int", 8, "MCTS: simulations (select by UCT, expand, roll out, back up)",
              min=1, max=256, show_if=("strategy", ("mcts",))),
        Param("c_explore", "float", 1.0, "MCTS: exploration constant c of UCT (0 = pure exploitation)",
              min=0.0, max=10.0, show_if=("strategy", ("mcts",))),
        Param("max_depth", "int", 3, "Most steps in a solution", min=1, max=32),
        Param("max_expansions", "int", 6, "Best-first: most expansions before stopping; ab_mcts: new steps made "
              "in all", min=1, max=256, show_if=("strategy", ("best_first", "ab_mcts"))),
        Param("ab_posterior", "choice", "auto", "AB-MCTS: the score posterior Thompson sampling draws from: beta "
              "(scores in [0, 1]), gaussian (normal-inverse-gamma, any scale), auto (beta while every score is in "
              "[0, 1])", choices=POSTERIORS, show_if=("strategy", ("ab_mcts",))),
        Param("step_delimiter", "str", "\n\n", "Text that ends a step (generation stops there)"),
        Param("end_marker", "str", "Answer:", "A step containing this finishes its branch ('' = none)"),
        Param("scorer", "choice", "llm_judge", "How partial solutions are scored", choices=SCORERS),
        Param("pass_threshold", "float", 0.5, "Score at least this counts as passing (trace display)"),
        Param("judge_model", "str", "", "Model alias for the scorer ('' = this node's model)",
              show_if=("scorer", ("llm_judge", "likelihood", "prm", "reward_model"))),
        *scoring_params(_scorer_show, DEFAULT_STEP_JUDGE, SCORERS, query_default="{problem}"),
        *decoding_params(temperature=0.8, max_tokens=64),
    )
    variadic_inputs = True
    uses_model = True

    @classmethod
    def required_inputs(cls, params: dict[str, Any]) -> list[str]:
        keys = ["prompt", "system"] + (["judge_prompt"] if params.get("scorer") == "llm_judge" else []) + (
            ["query"] if params.get("scorer") in ("prm", "reward_model") else [])
        names: list[str] = []
        for key in keys:
            for var in template_variables(str(params.get(key) or "")):
                if var not in RESERVED_VARS and var not in names:
                    names.append(var)
        return names

    @classmethod
    def validate_params(cls, params: dict[str, Any]) -> list[tuple[str, str]]:
        problems = decoding_problems(params) + regex_problems(params, params.get("scorer"))
        problems += [p for p in prm_problems(params, params.get("scorer")) if p[0] != "step_delimiter"]
        if not params.get("step_delimiter"):
            problems.append(("step_delimiter", "must not be empty (a blank line '\\n\\n' or '\\n' work well)"))
        return problems + strategy_problems(params)

    def run(self, inputs: dict[str, Any], params: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
        return _SearchRun(inputs, params, ctx).run()


class _SearchRun:
    """The state of one search: the tree, the base prompt, the counters."""

    def __init__(self, inputs: dict[str, Any], params: dict[str, Any], ctx: NodeContext) -> None:
        self.inputs, self.params, self.ctx = inputs, params, ctx
        self.tree = SearchTree()
        self.delimiter: str = params["step_delimiter"]
        self.end_marker: str | None = params["end_marker"]
        self.judge_model: str | None = params["judge_model"] or None
        prompt = build_prompt(params, inputs)
        self.problem = prompt if isinstance(prompt, str) else prompt[-1]["content"]
        base = ctx.backend().render_prompt(prompt) if not isinstance(prompt, str) else prompt + "\n"
        self.base_prompt = base
        self.sp = sampling_params(params, ctx.seed, stop=[*params["stop"], self.delimiter])
        self.expansions = 0
        self.calls = 0
        self.lock = threading.Lock()

    # -- expansion and scoring
    def _prompt_after(self, node: TreeNode) -> str:
        partial = self.tree.solution(node.id, self.delimiter)
        return self.base_prompt + (partial + self.delimiter if partial else "")

    def _sample_steps(self, requests: list[tuple[TreeNode, int, str]]) -> list[GenerateResult]:
        """For each (node, n, lead): n next steps after the node's partial solution plus `lead`, requested
        concurrently so the engine can batch them (a request of more than MAX_SAMPLES_PER_REQUEST samples goes
        out in parts). Seeds are handed out in request order before anything runs, so a run is reproducible."""
        pieces: list[tuple[int, TreeNode, int, str, int]] = []  # (request index, node, n, lead, first seed)
        for i, (node, n, lead) in enumerate(requests):
            for done in range(0, n, MAX_SAMPLES_PER_REQUEST):
                size = min(MAX_SAMPLES_PER_REQUEST, n - done)
                pieces.append((i, node, size, lead, self._take_seeds(size)))

        def one(piece: tuple[int, TreeNode, int, str, int]) -> GenerateResult:
            _, node, n, lead, start = piece
            return self.ctx.generate(self._prompt_after(node) + lead, self.sp, n=n,
                                     seeds=sample_seeds(self.ctx.seed, n, start=start),
                                     purpose="expand", parent=f"{self.ctx.node_id}:{node.id}",
                                     tag={"depth": node.depth + 1, "tree_node": node.id, "lead": lead})

        # one request per live branch, all in flight at once: the engine decodes them as one batch
        results = self.ctx.map(one, pieces)
        merged: list[GenerateResult] = []
        for i in range(len(requests)):
            parts = [r for piece, r in zip(pieces, results, strict=True) if piece[0] == i]
            merged.append(parts[0] if len(parts) == 1 else GenerateResult(
                prompt_text=parts[0].prompt_text if parts else "",
                completions=[c for p in parts for c in p.completions]))
        return merged

    def _take_seeds(self, n: int) -> int:
        with self.lock:
            start = self.calls
            self.calls += n
        return start

    def _expand(self, nodes: list[TreeNode], ks: list[int] | None = None, *, score: bool = True) -> list[TreeNode]:
        """Sample k next steps below each node (ks[i] below nodes[i]; default expand_k each) and score them
        unless `score` is False. A sample that stops at the delimiter before writing anything (the model
        wanted a blank line there) is drawn once more after that delimiter."""
        ks = ks if ks is not None else [self.params["expand_k"]] * len(nodes)
        max_depth = self.params["max_depth"]
        results = self._sample_steps([(node, k, "") for node, k in zip(nodes, ks, strict=True)])
        steps: dict[int, list[tuple[str, str, str]]] = {node.id: [] for node in nodes}  # (text, finish, lead)
        retry: list[tuple[TreeNode, int, str]] = []
        for node, result in zip(nodes, results, strict=True):
            self.expansions += 1
            blank = 0
            for c in result.completions:
                if c.text.strip() or c.finish_reason != "stop":
                    steps[node.id].append((c.text.strip(), c.finish_reason, ""))
                else:
                    blank += 1
            if blank:
                retry.append((node, blank, self.delimiter))
        if retry:
            for (node, _, lead), result in zip(retry, self._sample_steps(retry), strict=True):
                steps[node.id] += [(c.text.strip(), c.finish_reason, lead) for c in result.completions]
        children: list[TreeNode] = []
        for node in nodes:
            for text, finish_reason, lead in steps[node.id]:
                if not text:
                    child = self.tree.add(node.id, "", terminal=True, finish="empty", lead=lead, subtree=node.subtree)
                    child.pruned = True
                    continue
                finish = ""
                if self.end_marker and self.end_marker in text:
                    finish = "end_marker"
                elif finish_reason == "eog":
                    finish = "eog"
                elif node.depth + 1 >= max_depth:
                    finish = "max_depth"
                children.append(self.tree.add(node.id, text, terminal=bool(finish), finish=finish, lead=lead,
                                              subtree=node.subtree))
        if score:
            self._score(children)
        return children

    def _score(self, nodes: list[TreeNode]) -> None:
        scorer = self.params["scorer"]
        if not nodes:
            return
        if scorer == "none":
            for n in nodes:
                n.score = 0.0
            return
        partials = [self.tree.solution(n.id, self.delimiter) for n in nodes]
        extra = [{"partial": p, "problem": self.problem} for p in partials]
        params = {**self.params, "aggregate": "last"} if scorer == "prm" else self.params  # the newest step's
        verdicts = score_texts(scorer, partials, params, self.inputs, self.ctx,
                               prompt=self.base_prompt, model=self.judge_model, extra=extra)
        for n, v in zip(nodes, verdicts, strict=True):
            n.score = v.score

    # -- strategies
    def _beam(self) -> TreeNode | None:
        # int(): a null beam_width (None) must fail here, not slice the beam to everything
        width, max_depth = int(self.params["beam_width"]), self.params["max_depth"]
        beam = [self.tree.root]
        finished: list[TreeNode] = []
        for depth in range(1, max_depth + 1):
            children = self._expand(beam)
            finished += [c for c in children if c.terminal]
            open_ = [c for c in children if not c.terminal]
            for b in beam:
                if b.id != 0 and not any(not c.pruned for c in self.tree.children(b.id)):
                    b.terminal, b.finish = True, "exhausted"  # only empty steps came out: it is complete
                    finished.append(b)
            beam = self.tree.select(open_, width)
            self.ctx.progress(depth, max_depth)
            if not beam:
                break
        return self.tree.best(finished) or self.tree.best(beam)

    def _best_first(self) -> TreeNode | None:
        budget = self.params["max_expansions"]
        frontier = Frontier()
        frontier.push(self.tree.root)
        chosen: TreeNode | None = None
        while len(frontier) and self.expansions < budget:
            node = frontier.pop()
            if node.terminal:
                chosen = node
                break
            children = self._expand([node])
            if node.id != 0 and not any(not c.pruned for c in self.tree.children(node.id)):
                node.terminal, node.finish = True, "exhausted"
                frontier.push(node)
            for c in children:
                frontier.push(c)
            self.ctx.progress(self.expansions, budget)
        left = frontier.drain()
        for n in left:
            if n is not chosen and not n.terminal:
                n.pruned = True
        if chosen is None:
            terminals = [n for n in self.tree.nodes if n.terminal and n.finish != "empty"]
            chosen = self.tree.best(terminals) or self.tree.best(left)
        return chosen

    def run(self) -> dict[str, Any]:
        strategy = self.params["strategy"]
        runners = {"beam": _SearchRun._beam, "best_first": _SearchRun._best_first, "dvts": run_dvts,
                   "particles": run_particles, "mcts": run_mcts, "ab_mcts": run_ab_mcts}
        chosen = runners[strategy](self)
        chosen_path = self.tree.mark_chosen(chosen.id) if chosen is not None else [0]
        answer = self.tree.solution(chosen.id, self.delimiter).strip() if chosen is not None else ""
        solutions = [n for n in self.tree.nodes if n.terminal and n.finish != "empty"]
        if chosen is not None and chosen.id != 0 and chosen not in solutions:
            solutions.append(chosen)
        candidates = [
            Candidate(text=self.tree.solution(n.id, self.delimiter).strip(), index=i, source=self.ctx.node_id,
                      score=n.score, scores={self.ctx.node_id: n.score} if n.score is not None else {},
                      finish_reason=n.finish, meta={"tree_node": n.id, "depth": n.depth})
            for i, n in enumerate(solutions)
        ]
        winner = next((i for i, n in enumerate(solutions) if chosen is not None and n.id == chosen.id), None)
        tree = {**self.tree.to_json(), "strategy": strategy, "delimiter": self.delimiter,
                "expansions": self.expansions, "answer": answer, "chosen_path": chosen_path}
        self.ctx.event("tree", tree)
        return {"text": answer, "candidates": CandidateSet(candidates, prompt=self.base_prompt, winner=winner),
                "tree": tree}
