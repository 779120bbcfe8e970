"""Builds a tiny BERT cross-encoder GGUF with random weights and a classification head (cls + cls.output), which
llama.cpp loads with rank pooling: a real rank model in a few kilobytes, for plumbing tests only."""

from __future__ import annotations

import string
from pathlib import Path

import numpy as np

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
N_EMBD, N_HEAD, N_FF, N_LAYER, N_CTX = 32, 2, 64, 2, 256


def _vocab() -> list[str]:
    chars = string.ascii_lowercase + string.digits + ".,?!+-=:*/()"
    return SPECIAL + ["\u2581" + c for c in chars] + list(chars)


def write_rank_gguf(path: Path, seed: int = 0, head: bool = True) -> Path:
    """A BERT with a rank head (or, with head=False, the same BERT without one) at `path`."""
    import gguf

    rng = np.random.default_rng(seed)
    tokens = _vocab()
    writer = gguf.GGUFWriter(str(path), "bert")
    writer.add_name("tiny-rank-test")
    writer.add_context_length(N_CTX)
    writer.add_embedding_length(N_EMBD)
    writer.add_feed_forward_length(N_FF)
    writer.add_block_count(N_LAYER)
    writer.add_head_count(N_HEAD)
    writer.add_layer_norm_eps(1e-12)
    writer.add_causal_attention(False)
    writer.add_pooling_type(gguf.PoolingType.RANK if head else gguf.PoolingType.CLS)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("bert")
    writer.add_token_list(tokens)
    writer.add_token_types([gguf.TokenType.CONTROL if t in SPECIAL else gguf.TokenType.NORMAL for t in tokens])
    writer.add_token_type_count(2)
    writer.add_pad_token_id(0)
    writer.add_unk_token_id(1)
    writer.add_bos_token_id(2)
    writer.add_sep_token_id(3)
    writer.add_mask_token_id(4)

    def tensor(name: str, *shape: int) -> None:
        writer.add_tensor(name, (rng.standard_normal(shape) * 0.2).astype(np.float32))

    def ones(name: str, n: int) -> None:
        writer.add_tensor(name, np.ones(n, dtype=np.float32))

    tensor("token_embd.weight", len(tokens), N_EMBD)
    tensor("token_types.weight", 2, N_EMBD)
    tensor("position_embd.weight", N_CTX, N_EMBD)
    ones("token_embd_norm.weight", N_EMBD)
    tensor("token_embd_norm.bias", N_EMBD)
    for i in range(N_LAYER):
        for part in ("attn_q", "attn_k", "attn_v", "attn_output"):
            tensor(f"blk.{i}.{part}.weight", N_EMBD, N_EMBD)
            tensor(f"blk.{i}.{part}.bias", N_EMBD)
        ones(f"blk.{i}.attn_output_norm.weight", N_EMBD)
        tensor(f"blk.{i}.attn_output_norm.bias", N_EMBD)
        tensor(f"blk.{i}.ffn_up.weight", N_FF, N_EMBD)
        tensor(f"blk.{i}.ffn_up.bias", N_FF)
        tensor(f"blk.{i}.ffn_down.weight", N_EMBD, N_FF)
        tensor(f"blk.{i}.ffn_down.bias", N_EMBD)
        ones(f"blk.{i}.layer_output_norm.weight", N_EMBD)
        tensor(f"blk.{i}.layer_output_norm.bias", N_EMBD)
    if head:
        tensor("cls.weight", N_EMBD, N_EMBD)
        tensor("cls.bias", N_EMBD)
        tensor("cls.output.weight", 1, N_EMBD)
        tensor("cls.output.bias", 1)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
