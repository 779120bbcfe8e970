"""The canary decode: load the bundled model, greedily decode a few tokens, report JSON (run in a child process)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

CANARY_PROMPT = "The capital of France is"
CANARY_EXPECTED = "Paris"
CANARY_TOKENS = 8


def run_canary(model_path: str | None = None) -> dict:
    """Decodes CANARY_TOKENS greedy tokens; `ok` is whether the text holds the expected word (else it is garbage)."""
    import llama_cpp  # here, not at the top: the import itself may crash a broken build (the caller runs us in a child)

    from backends.llama.models.bundled import bundled_model_path

    path = model_path or str(bundled_model_path())
    model = llama_cpp.Llama(model_path=path, n_ctx=128, n_threads=max(1, min(4, os.cpu_count() or 1)),
                            verbose=False, seed=0)
    started = time.perf_counter()
    out = model.create_completion(CANARY_PROMPT, max_tokens=CANARY_TOKENS, temperature=0.0, top_k=1)
    seconds = time.perf_counter() - started
    text = out["choices"][0]["text"]
    tokens = int(out.get("usage", {}).get("completion_tokens", 0))
    system_info = (llama_cpp.llama_print_system_info() or b"").decode(errors="replace").strip()
    return {"ok": CANARY_EXPECTED.lower() in text.lower(), "text": text, "tokens": tokens,
            "tokens_per_s": round(tokens / seconds, 1) if seconds > 0 else 0.0, "model": os.path.basename(path),
            "system_info": system_info, "expected": CANARY_EXPECTED}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--model", default=None, help="a GGUF file (default: the bundled model)")
    args = parser.parse_args(argv)
    report = run_canary(args.model)
    sys.stdout.write(json.dumps(report) + "\n" if args.json else f"{report}\n")
    return 0 if report["ok"] else 3


if __name__ == "__main__":
    sys.exit(main())
