"""Rank models on llama.cpp: a GGUF with a classification head (cross-encoder rerankers, converted reward models,
Qwen3-Reranker-style judges) run with rank pooling, scoring (query, document) pairs in batches; it never
generates."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from backends.base import (
    BackendError,
    CancelToken,
    ChoiceResult,
    GenerateResult,
    ModelFileError,
    ModelSpec,
    Prompt,
    RankResult,
    SamplingParams,
    ScoreResult,
    TokenCallback,
    Usage,
)
from backends.llama.devices import resolve_device
from backends.llama.models.gguf import GGUFHeader, content_fingerprint, read_gguf_header
from backends.llama.worker.llama_model import LlamaModel

log = logging.getLogger(__name__)

RANK_POOLING = 4
"""llama.cpp's LLAMA_POOLING_TYPE_RANK (also the value of `{arch}.pooling_type` in a GGUF)."""
HEAD_TENSORS = ("cls.output.weight", "cls.weight")
DEFAULT_N_SEQ = 8
DEFAULT_N_BATCH = 2048
"""Tokens per llama_decode: pairs are packed into batches of at most this many tokens (and n_seq_max pairs)."""


def rank_head_problem(header: GGUFHeader) -> str | None:
    """Why a GGUF cannot run with rank pooling (no classification head), or None when it can."""
    arch = header.metadata.get("general.architecture", "")
    pooling = header.metadata.get(f"{arch}.pooling_type")
    names = {t.name for t in header.tensors}
    if pooling == RANK_POOLING or any(name in names for name in HEAD_TENSORS):
        return None
    return (f"it has no classification head ({' or '.join(HEAD_TENSORS)}) and does not declare rank pooling: it is "
            "a generator. Use a reranker / reward-model GGUF converted with its head (e.g. bge-reranker, "
            "Qwen3-Reranker), or remove `pooling: rank` to generate with it")


def is_rank_model(path: str | Path) -> bool:
    """Whether a GGUF file is a rank model (has a classification head / declares rank pooling)."""
    return rank_head_problem(read_gguf_header(path)) is None


class RankBackend:
    """One rank-pooling GGUF: `rank(query, documents)` scores the pairs, packed into batches of at most n_batch
    tokens and n_seq_max pairs per llama_decode. Options (ModelSpec.options): n_seq_max (default 8), n_batch
    (default 2048; also the longest pair)."""

    def __init__(self, path: str | Path, spec: ModelSpec | None = None) -> None:
        self.path = Path(path).expanduser().resolve()
        self.spec = spec or ModelSpec(source="path", path=str(self.path), options=(("pooling", "rank"),))
        header = read_gguf_header(self.path)
        problem = rank_head_problem(header)
        if problem:
            raise ModelFileError(f"[rank_needs_head] {self.path.name} cannot be a `pooling: rank` model: {problem}.")
        self.fingerprint = content_fingerprint(self.path)
        device = resolve_device(self.spec)
        self.model = LlamaModel(self.path, n_gpu_layers=device["n_gpu_layers"])
        lib = self.model._lib
        self._lib = lib
        self.n_seq = int(self.spec.option("n_seq_max", DEFAULT_N_SEQ))
        self.n_batch = int(self.spec.option("n_batch", DEFAULT_N_BATCH))
        self.n_ctx = min(self.n_batch, max(8, self.model.n_ctx_train))
        """The longest pair (query, document and special tokens)."""
        params = lib.llama_context_default_params()
        params.n_ctx = self.n_batch
        params.n_batch = params.n_ubatch = self.n_batch  # a non-causal model needs whole pairs in one ubatch
        params.n_seq_max = self.n_seq
        params.kv_unified = True  # every pair may use the whole context (a pair is at most n_batch tokens)
        params.embeddings = True
        params.pooling_type = RANK_POOLING
        params.n_threads = params.n_threads_batch = int(device["threads"])
        params.no_perf = True
        self.ctx = lib.llama_init_from_model(self.model.ptr, params)
        if not self.ctx:
            self.model.close()
            raise BackendError(f"llama.cpp could not create a rank-pooling context for {self.path.name}.")
        self.batch = lib.llama_batch_init(self.n_batch, 0, self.n_seq)
        self.n_cls_out = max(1, int(lib.llama_model_n_cls_out(self.model.ptr)))
        template = lib.llama_model_chat_template(self.model.ptr, b"rerank")
        self.rerank_template: str | None = template.decode("utf-8", errors="replace") if template else None
        self.device = dict(device)
        self._lock = threading.Lock()
        self._closed = False

    # -- identity ------------------------------------------------------------------------------------

    @property
    def model_id(self) -> str:
        return f"{self.path.name}#{self.fingerprint}@rank"

    def info(self) -> dict[str, Any]:
        return {"backend": "llama.cpp (rank pooling)", "model_id": self.model_id, "model": str(self.path),
                "pooling": "rank", "n_cls_out": self.n_cls_out, "n_seq_max": self.n_seq, "n_ctx": self.n_ctx,
                "rerank_template": bool(self.rerank_template), "loaded": not self._closed}

    def render_prompt(self, prompt: Prompt, add_generation_prompt: bool = True) -> str:
        return self.model.render(prompt, add_generation_prompt)

    def tokenize(self, text: str) -> list[int]:
        return self.model.tokenize(text)

    # -- what a rank model cannot do ----------------------------------------------------------------

    def _refuse(self, what: str) -> BackendError:
        return BackendError(f"[rank_model_generates] {self.path.name} is a rank model (`pooling: rank`): it scores "
                            f"(verifier method reward_model), it cannot {what}. Give this node a generator model.")

    def generate(self, prompt: Prompt, params: SamplingParams, n: int = 1, seeds: Sequence[int] | None = None,
                 on_token: TokenCallback | None = None, cancel: CancelToken | None = None) -> GenerateResult:
        raise self._refuse("generate")

    def score(self, prefix: Prompt, continuations: Sequence[str], cancel: CancelToken | None = None) -> ScoreResult:
        raise self._refuse("score likelihoods")

    def choice_logprobs(self, prompt: Prompt, choices: Sequence[str], cancel: CancelToken | None = None,
                        ) -> ChoiceResult:
        raise self._refuse("judge")

    # -- ranking -------------------------------------------------------------------------------------

    def pair_tokens(self, query: str, document: str, query_tokens: list[int] | None = None) -> list[int]:
        """The pair as llama-server's /rerank lays it out: the GGUF's rerank template when it has one, else
        [BOS] query [EOS] [SEP] document [EOS] with each special token where the vocabulary asks for it
        (`query_tokens`: the query already tokenised, so that many documents do not tokenise it again)."""
        model, lib = self.model, self._lib
        if self.rerank_template:
            text = self.rerank_template.replace("{query}", query).replace("{document}", document)
            return model.tokenize(text, parse_special=True)
        vocab = model.vocab
        sep = int(lib.llama_vocab_sep(vocab))
        eos = model.eos_id if model.eos_id >= 0 else sep
        add_eos, add_sep = bool(lib.llama_vocab_get_add_eos(vocab)), bool(lib.llama_vocab_get_add_sep(vocab))
        out = [model.bos_id] if model.add_bos and model.bos_id >= 0 else []
        out += query_tokens if query_tokens is not None else self._plain_tokens(query)
        if add_eos and eos >= 0:
            out.append(eos)
        if add_sep and sep >= 0:
            out.append(sep)
        out += self._plain_tokens(document)
        if add_eos and eos >= 0:
            out.append(eos)
        elif add_sep and sep >= 0:
            out.append(sep)
        return out

    def _plain_tokens(self, text: str) -> list[int]:
        return self.model.tokenize(text, add_special=False, parse_special=False)

    def rank(self, query: str, documents: Sequence[str], cancel: CancelToken | None = None) -> RankResult:
        """The head's first output for each (query, document) pair, raw (no sigmoid), in the documents' order.
        Every length is checked before any pair is scored, the query tokenised once; pairs are tokenised again a
        batch at a time, so a request holds about one batch of tokens, not all of its pairs'."""
        query_tokens = self._plain_tokens(query)
        if len(query_tokens) >= self.n_ctx:
            raise BackendError(f"The query is {len(query_tokens)} tokens; {self.path.name} takes {self.n_ctx} per "
                               "pair (the query, a document and special tokens). Shorten it or raise n_ctx.")
        lengths = []
        for i, document in enumerate(documents):
            if cancel is not None:
                cancel.raise_if_cancelled()
            lengths.append(len(self.pair_tokens(query, str(document), query_tokens)))
            if lengths[-1] > self.n_ctx:
                raise BackendError(f"Document {i} with the query is {lengths[-1]} tokens; {self.path.name} takes "
                                   f"{self.n_ctx} per pair. Shorten it or raise n_ctx.")
        usage = Usage(prompt_tokens=sum(lengths), prompt_tokens_evaluated=sum(lengths))
        scores: list[float] = []
        for group in self._groups(lengths):
            if cancel is not None:
                cancel.raise_if_cancelled()
            pairs = [self.pair_tokens(query, str(documents[i]), query_tokens) for i in group]
            with self._lock:
                if self._closed:
                    raise BackendError("This model was unloaded; get it again.")
                scores += self._decode(pairs)
        return RankResult(scores=scores, usage=usage)

    def _groups(self, lengths: list[int]) -> list[list[int]]:
        """Consecutive pairs (their indexes) packed into batches of at most n_batch tokens and n_seq_max pairs."""
        groups: list[list[int]] = []
        size = 0
        for i, length in enumerate(lengths):
            if not groups or len(groups[-1]) >= self.n_seq or size + length > self.n_batch:
                groups.append([])
                size = 0
            groups[-1].append(i)
            size += length
        return groups

    def _decode(self, pairs: list[list[int]]) -> list[float]:
        lib, batch = self._lib, self.batch
        mem = lib.llama_get_memory(self.ctx)
        if mem:
            lib.llama_memory_clear(mem, True)
        n = 0
        for seq, tokens in enumerate(pairs):
            for pos, token in enumerate(tokens):
                batch.token[n], batch.pos[n], batch.n_seq_id[n], batch.logits[n] = token, pos, 1, 1
                batch.seq_id[n][0] = seq
                n += 1
        batch.n_tokens = n
        rc = lib.llama_decode(self.ctx, batch)
        if rc != 0:
            raise BackendError(f"llama.cpp failed to run the rank model {self.path.name} (code {rc}).")
        out = []
        for seq in range(len(pairs)):
            values = lib.llama_get_embeddings_seq(self.ctx, seq)
            if not values:
                raise BackendError(f"{self.path.name} returned no rank score: is it a rank-pooling model?")
            out.append(float(values[0]))
        return out

    # -- lifecycle -----------------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return self._lock.locked()

    def memory_bytes(self) -> int:
        return self.model.size_bytes

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._lib.llama_batch_free(self.batch)
            self._lib.llama_free(self.ctx)
            self.model.close()
