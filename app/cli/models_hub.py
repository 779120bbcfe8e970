"""`metagen models pull | list | search | rm | catalog`: getting local models from the Hugging Face Hub, and
seeing what is here and what to get for each role."""

from __future__ import annotations

import argparse
import json
import sys

from app.cli.exit_codes import EXIT_FAILED, EXIT_INVALID, EXIT_OK

EXIT_INTERRUPTED = 130


def register_hub_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("pull", help="download a GGUF from the Hugging Face Hub into the models folder",
                       description="Pull USER/REPO[:QUANT] (llama.cpp's and Ollama's convention; QUANT such as Q4_K_M "
                                   "or q8_0, default Q4_K_M, else the repo's only GGUF). Resumes a cut or cancelled "
                                   "transfer, checks the Hub's sha256 before the file gets its .gguf name, reuses an "
                                   "identical file in the models folder or the Hugging Face cache. HF_TOKEN for gated "
                                   "repos, HF_ENDPOINT for a mirror, HF_HUB_OFFLINE=1 forbids it.")
    p.add_argument("ref", metavar="REPO[:QUANT]", help="such as unsloth/Qwen3-0.6B-GGUF:Q4_K_M")
    p.add_argument("--file", default=None, metavar="NAME.gguf", help="pick a file by name (a shard pulls all)")
    p.add_argument("--revision", default=None, metavar="REV", help="a branch, tag or commit (default main)")
    p.add_argument("--models-dir", default=None, metavar="DIR", help="where to put it (default: the models folder, "
                   "$METAGEN_MODELS)")
    p.add_argument("--no-verify", action="store_true",
                   help="take a file the Hub lists neither a size nor a sha256 for (refused by default: its bytes "
                        "cannot be checked)")
    p.set_defaults(func=cmd_pull)
    p = sub.add_parser("list", help="local models: file, size, quant, context, templates, the entry to paste",
                       description="The bundled model and every GGUF of the models folder, with the `models:` entry "
                                   "that runs it, and which llama.cpp build (CPU, CUDA, Vulkan, Metal) runs here.")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.add_argument("--models-dir", default=None, metavar="DIR", help="another models folder")
    p.set_defaults(func=cmd_list)
    p = sub.add_parser("search", help="Hub repos with GGUF files matching QUERY")
    p.add_argument("query", metavar="QUERY")
    p.add_argument("--limit", type=int, default=20, metavar="N")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(func=cmd_search)
    p = sub.add_parser("rm", help="delete a model of the models folder by file name")
    p.add_argument("name", metavar="NAME", help="a file name `metagen models list` shows")
    p.add_argument("--models-dir", default=None, metavar="DIR")
    p.set_defaults(func=cmd_rm)
    p = sub.add_parser("catalog", help="recommended models by role (generator, reasoning, PRM, reward model, draft)")
    p.add_argument("--role", default=None, help="only this role")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(func=cmd_catalog)


def _fail(exc: Exception) -> int:
    print(f"error: {exc}", file=sys.stderr)
    code = getattr(exc, "code", None)
    return EXIT_INVALID if code in ("bad_ref", "unknown_repo", "no_gguf", "unknown_quant", "pick_quant",
                                    "unknown_file", "bad_name", "unknown_model") else EXIT_FAILED


def cmd_pull(args: argparse.Namespace) -> int:
    from app.service.errors import UserError
    from app.service.model_pull import pull_model, tqdm_progress

    try:
        result = pull_model(args.ref, file=args.file, revision=args.revision, models_dir=args.models_dir,
                            progress=tqdm_progress, verify=not getattr(args, "no_verify", False))
    except UserError as exc:
        return _fail(exc)
    except KeyboardInterrupt:
        print("\ncancelled: the partial file stays in the models folder; pull again to continue from it",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    for name, how in result.how.items():
        print(f"{name}: {how}")
    print(f"model: {result.path}")
    print("entry to paste under `models:` in a workflow:")
    print(f"  main: {json.dumps(result.entry())}")
    return EXIT_OK


def _size(n: int | None) -> str:
    return f"{(n or 0) / 1e9:.2f} GB" if (n or 0) >= 1e8 else f"{(n or 0) / 1e6:.1f} MB"


def cmd_list(args: argparse.Namespace) -> int:
    from app.service.local_models import build_description, build_line, local_models
    from app.service.model_pull import default_models_dir

    folder = args.models_dir or default_models_dir()
    skipped: list[tuple[str, str]] = []
    rows = local_models(folder, skipped)
    if args.json:
        print(json.dumps({"build": build_description(), "models_dir": str(folder), "models": rows,
                          "skipped": [{"path": p, "reason": r} for p, r in skipped]}, indent=2))
        return EXIT_OK
    print(build_line())
    print(f"models folder: {folder}")
    for r in rows:
        can = [w for w, on in (("chat template", r["chat_template"]), ("thinking template", r["thinking_template"]),
                               ("rank head", r["rank_head"])) if on]
        print(f"\n{r['file']}  ({r['source']})")
        print(f"  {_size(r['size_bytes'])} · {r['quantization']} · {r['architecture']} · context "
              f"{r['context_length']} · {', '.join(can) or 'no chat template'}")
        print(f"  entry: {json.dumps(r['entry'])}")
    for path, reason in skipped:
        print(f"\nskipped {path}: {reason}")
    return EXIT_OK


def cmd_search(args: argparse.Namespace) -> int:
    from app.service.errors import UserError
    from app.service.model_pull import search_models

    try:
        found = search_models(args.query, limit=args.limit)
    except UserError as exc:
        return _fail(exc)
    if args.json:
        print(json.dumps(found, indent=2))
        return EXIT_OK
    if not found:
        print(f"no GGUF repos match {args.query!r}")
    width = max([len(m["repo"]) for m in found] + [4])
    for m in found:
        print(f"{m['repo']:<{width}}  {m['downloads']:>9} downloads  updated {str(m['updated'])[:10]}")
    return EXIT_OK


def cmd_rm(args: argparse.Namespace) -> int:
    from app.service.errors import UserError
    from app.service.model_pull import remove_model

    try:
        removed = remove_model(args.name, args.models_dir)
    except UserError as exc:
        return _fail(exc)
    for path in removed:
        print(f"removed {path}")
    return EXIT_OK


def cmd_catalog(args: argparse.Namespace) -> int:
    from app.service.model_pull import default_models_dir
    from app.service.model_roles import catalog_entries, entry_models

    entries = [e for e in catalog_entries() if args.role in (None, e["role"])]
    if not entries:
        print(f"error: no role {args.role!r}; roles: generator, reasoning, prm, reward_model, draft", file=sys.stderr)
        return EXIT_INVALID
    folder = default_models_dir()
    if args.json:
        print(json.dumps([{**e, "models": entry_models(e, folder)} for e in entries], indent=2, ensure_ascii=False))
        return EXIT_OK
    role = None
    for e in entries:
        if e["role"] != role:
            role = e["role"]
            print(f"\n== {role} ==")
        print(f"{e['name']}  [{e['fits']}, {e['size_gb']:.2f} GB, {e['licence']}]")
        print(f"  metagen models pull {e['pull']}")
        print(f"  models: {json.dumps(entry_models(e, folder), ensure_ascii=False)}")
        print(f"  {e['node']['kind']} params: {json.dumps(e['node']['params'], ensure_ascii=False)}")
        if e.get("notes"):
            print(f"  note: {e['notes']}")
    return EXIT_OK
