"""`metagen history`, `metagen diff`, `metagen restore` and `metagen publish`: a workflow's versions on the command
line (and `metagen diff FILE`, git's textconv driver)."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from app.cli.exit_codes import EXIT_INVALID, EXIT_OK

GIT_PREFIX = "git:"


def _common(p: argparse.ArgumentParser, *, json_flag: bool = True) -> None:
    p.add_argument("--workflows", default=None, metavar="DIR", help="workflows folder (default: in the user data "
                   "folder, or $METAGEN_WORKFLOWS)")
    p.add_argument("--db", default=None, metavar="PATH", help="trace database (default: $METAGEN_TRACE_DB or the "
                   "user data folder)")
    if json_flag:
        p.add_argument("--json", action="store_true", help="print JSON")


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser("history", help="a workflow's saved versions, newest first, with runs and best figure",
                              description="Every save records a version (the hash its runs carry); a file changed "
                              "outside the studio is recorded when listed here.")
    p.add_argument("workflow", metavar="NAME", help="a workflow of the workflows folder, or a file's path")
    p.add_argument("--limit", type=int, default=None, help="at most this many versions")
    p.add_argument("--set-name", nargs=2, default=None, metavar=("VERSION", "LABEL"),
                   help="name a version (a hash prefix, -1, ...); an empty LABEL removes the name")
    _common(p)
    p.set_defaults(func=cmd_history)

    p = subparsers.add_parser("diff", help="what changed between two workflows or versions (semantic)",
                              description="A and B: files, NAME (the file as saved), NAME@VERSION (a hash prefix, a "
                              "version name, -1 for the one before the latest), or NAME@git:REV. With one FILE it "
                              "prints the workflow one fact per line: git's textconv driver (docs/versions.md).")
    p.add_argument("a", metavar="A")
    p.add_argument("b", metavar="B", nargs="?", default=None)
    _common(p)
    p.set_defaults(func=cmd_diff)

    p = subparsers.add_parser("restore", help="write a recorded version back to its file (the current one is "
                              "recorded first)")
    p.add_argument("target", metavar="NAME@VERSION")
    p.add_argument("-m", "--message", default="", help="the restored version's message")
    _common(p)
    p.set_defaults(func=cmd_restore)

    p = subparsers.add_parser("publish", help="the version app links, MCP tools, /v1 models and `auto` serve",
                              description="Without @VERSION: the file as saved now. Editing the file then changes "
                              "nothing served until the next publish.")
    p.add_argument("target", metavar="NAME[@VERSION]")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--unpublish", action="store_true", help="serve the file as saved again")
    group.add_argument("--show", action="store_true", help="say which version is published")
    _common(p)
    p.set_defaults(func=cmd_publish)


def _versions(args: argparse.Namespace) -> Any:
    from app.platform.paths import workflows_dir
    from app.service.versions import WorkflowVersions, store_at

    folder = Path(args.workflows).expanduser() if args.workflows else workflows_dir()
    return WorkflowVersions(store_at(args.db), folder)


def _fail(exc: BaseException) -> int:
    """A usage error's message (a trace database refused, a version unknown): RuntimeError covers TraceStoreError
    and VersionError without loading the ORM to name them."""
    sys.stderr.write(f"error: {exc}\n")
    return EXIT_INVALID


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def _when(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M")


def cmd_history(args: argparse.Namespace) -> int:
    from app.service.errors import UserError

    try:
        versions = _versions(args)
        if args.set_name:
            ref, label = args.set_name
            versions.set_name(args.workflow, ref, label)
        rows = versions.history(args.workflow, limit=args.limit)
    except (UserError, RuntimeError, sqlite3.Error) as exc:
        return _fail(exc)
    if not rows:
        _, path = versions.locate(args.workflow)
        if not path.is_file():
            return _fail(ValueError(f"no workflow {args.workflow!r}: {path} does not exist and no version of it is "
                                    "recorded (give a file's path, or the folder with --workflows DIR)"))
        if not args.json:
            sys.stdout.write(f"{args.workflow}: no versions recorded ({path} does not load as a workflow: "
                             f"`metagen validate {path}` says why)\n")
            return EXIT_OK
    if args.json:
        keys = ("version", "name", "message", "created_at", "runs", "best")
        _print_json({"versions": [{k: r[k] for k in keys} for r in rows]})
        return EXIT_OK
    sys.stdout.write(f"{'version':16}  {'saved':16}  {'runs':>5}  {'best':>6}  name / message\n")
    for r in rows:
        best = "" if r["best"] is None else f"{r['best']:.3f}"
        marks = "".join((" [published]" if r["published"] else "", " [file]" if r["current"] else ""))
        label = " ".join(x for x in (f"({r['name']})" if r["name"] else "", r["message"] or "") if x)
        sys.stdout.write(f"{r['version']:16}  {_when(r['created_at']):16}  {r['runs']:>5}  {best:>6}  "
                         f"{label}{marks}\n")
    return EXIT_OK


def _git_text(path: Path, rev: str) -> str:
    """The file at git revision `rev` (`git show REV:path` from the file's repository)."""
    folder = path.resolve().parent
    try:
        top = subprocess.run(["git", "-C", str(folder), "rev-parse", "--show-toplevel"], capture_output=True,
                             text=True, check=True).stdout.strip()
        rel = path.resolve().relative_to(Path(top).resolve()).as_posix()
        return subprocess.run(["git", "-C", top, "show", f"{rev}:{rel}"], capture_output=True, text=True,
                              check=True).stdout
    except FileNotFoundError:
        raise ValueError("git is not installed; NAME@git:REV needs it") from None
    except subprocess.CalledProcessError as exc:
        reason = (exc.stderr or "").strip().splitlines()
        raise ValueError(f"git cannot show {path} at {rev!r}: {reason[-1] if reason else exc}") from None
    except ValueError:
        raise ValueError(f"{path} is not inside a git repository") from None


def _side(versions: Any, spec: str) -> tuple[str, dict[str, str], str]:
    """(YAML, sub-workflows by reference, label) of one side of a diff."""
    from app.service.versions import split_ref

    path = Path(spec).expanduser()
    if path.is_file():
        text = path.read_text(encoding="utf-8")
        return text, _children(versions, text, path), str(path)
    name, ref = split_ref(spec)
    if ref is not None and ref.startswith(GIT_PREFIX):
        _, file = versions.locate(name)
        text = _git_text(file, ref[len(GIT_PREFIX):])
        return text, _children(versions, text, file), spec
    if ref is None:
        _, file = versions.locate(name)
        if not file.is_file():
            raise ValueError(f"no workflow file {spec!r} (nor {file}); give a path, NAME or NAME@VERSION")
        text = file.read_text(encoding="utf-8")
        return text, _children(versions, text, file), str(file)
    version = versions.get(name, ref)
    return version.yaml, version.children, f"{name}@{version.version}"


def _children(versions: Any, text: str, path: Path) -> dict[str, str]:
    from app.workflow.problems import WorkflowError

    try:
        return dict(versions.identify(text, path).children)
    except WorkflowError:
        return {}


def cmd_diff(args: argparse.Namespace) -> int:
    from app.service.errors import UserError
    from app.service.versions import diff_report, diff_texts, textconv

    if args.b is None:  # git's textconv: one file, one fact per line; never fails on a file that is not a workflow
        path = Path(args.a)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            return _fail(ValueError(f"cannot read {path}: {exc}"))
        sys.stdout.write(textconv(text))
        return EXIT_OK
    try:
        versions = _versions(args)
        text_a, children_a, label_a = _side(versions, args.a)
        text_b, children_b, label_b = _side(versions, args.b)
        diff = diff_texts(text_a, text_b, children_a, children_b)
    except (UserError, RuntimeError, sqlite3.Error, ValueError, OSError) as exc:
        return _fail(exc)
    if args.json:
        _print_json({"a": label_a, "b": label_b, **diff})
    else:
        sys.stdout.write(f"--- {label_a}\n+++ {label_b}\n" + diff_report(diff))
    return EXIT_OK


def cmd_restore(args: argparse.Namespace) -> int:
    from app.service.errors import UserError
    from app.service.versions import split_ref

    name, ref = split_ref(args.target)
    if ref is None:
        return _fail(ValueError(f"give the version to restore: {name}@VERSION (`metagen history {name}` lists them)"))
    try:
        versions = _versions(args)
        restored, children = versions.restore_tree(name, ref, message=args.message)
        _, path = versions.locate(name)
    except (UserError, RuntimeError, sqlite3.Error, OSError) as exc:
        return _fail(exc)
    if args.json:
        _print_json({"workflow": restored.workflow, "version": restored.version, "path": str(path),
                     "subworkflows": [str(c) for c in children]})
    else:
        sys.stdout.write(f"restored {restored.workflow}@{restored.version} to {path} (the file before it is "
                         "kept as a version)\n")
        for child in children:
            sys.stdout.write(f"  and its sub-workflow {child} (kept as a version first)\n")
    return EXIT_OK


def cmd_publish(args: argparse.Namespace) -> int:
    from app.service.errors import UserError
    from app.service.versions import split_ref

    name, ref = split_ref(args.target)
    try:
        versions = _versions(args)
        key, _ = versions.locate(name)
        if args.unpublish:
            was = versions.unpublish(name)
            data: dict[str, Any] = {"workflow": key, "version": None, "unpublished": was}
            line = f"{key}: nothing published now; the file as saved is served" + ("" if was else " (as before)")
        elif args.show:
            published = versions.published(name)
            data = {"workflow": key, "version": published.version if published else None}
            line = (f"{key}: {published.version} is published" if published else
                    f"{key}: nothing published; the file as saved is served")
        else:
            version = versions.publish(name, ref)
            data = {"workflow": key, "version": version.version, "name": version.label}
            line = f"published {key}@{version.version}: app links, MCP tools and /v1 serve it until the next publish"
    except (UserError, RuntimeError, sqlite3.Error) as exc:
        return _fail(exc)
    if args.json:
        _print_json(data)
    else:
        sys.stdout.write(line + "\n")
    return EXIT_OK
