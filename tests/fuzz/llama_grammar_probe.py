"""Child process: hands each grammar it reads (one JSON string per line) to llama.cpp's own grammar parser.

For each line it answers `ok 1` (llama.cpp made a grammar sampler) or `ok 0` (llama.cpp refused it). A grammar
that crashes the parser kills this process, so the parent sees which one did it. The model is loaded
vocab-only (no weights), which is all the parser needs for token references like <|im_end|>.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def _load_vocab(lib: Any) -> tuple[Any, Any]:
    from backends.llama.models.bundled import bundled_model_path

    params = lib.llama_model_default_params()
    params.vocab_only = True
    model = lib.llama_model_load_from_file(str(bundled_model_path()).encode(), params)
    if not model:
        raise SystemExit("cannot load the bundled model's vocabulary")
    return model, lib.llama_model_get_vocab(model)


def main() -> int:
    import llama_cpp.llama_cpp as lib

    lib.llama_backend_init()
    quiet = lib.llama_log_callback(lambda level, text, user_data: None)  # kept alive for the whole process
    lib.llama_log_set(quiet, None)
    _model, vocab = _load_vocab(lib)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    for line in sys.stdin:
        grammar = json.loads(line)
        sampler = lib.llama_sampler_init_grammar(vocab, grammar.encode("utf-8"), b"root")
        if sampler:
            lib.llama_sampler_free(sampler)
        sys.stdout.write(f"ok {1 if sampler else 0}\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
