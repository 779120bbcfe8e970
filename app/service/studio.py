"""The service layer the UI calls: workflow files, YAML <-> editor JSON, validation, queued runs, models."""

from __future__ import annotations

import contextlib
import logging
import shutil
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from app.platform import paths
from app.platform.fileio import atomic_write_text
from app.run.fake_script import FakeScript
from app.run.live_run import LiveRun
from app.run.scheduler import Budget, CancelToken, RunResult, Scheduler, resolve_inputs
from app.run.status import CANCELLED, FAILED, INVALID, QUEUED, SUCCEEDED
from app.service.ended_runs import ended_run_snapshot
from app.service.errors import UserError
from app.service.evaluations import EvaluationService
from app.service.folder_ports import FolderPorts
from app.service.gallery import Gallery
from app.service.interruptible import wait_interruptibly
from app.service.model_catalog import ModelCatalog
from app.service.model_hub import ModelHub
from app.service.run_inputs import required_problem, unpulled_warnings
from app.service.tool_answers import tool_answer_json
from app.service.tune_jobs import TuneJobs
from app.share.consent import RemoteConsent
from app.share.policy import (
    SharePolicy,
    inputs_problem,
    resolve_model_choices,
    runs_per_address,
    tree_refusals,
)
from app.share.run_gate import QueueFullError, RunGate
from app.share.visitors import VisitorIdentities
from app.workflow.files import list_workflow_names, safe_workflow_name, workflow_path
from app.workflow.problems import Issue, WorkflowError, errors
from app.workflow.spec import Workflow, load_workflow_text, workflow_from_dict
from app.workflow.subworkflows import CHILD_KINDS, CheckMemo, ChildLoader, workflow_ports, workflow_texts
from app.workflow.validation import check as check_tree
from nodes.registry import NodeRegistry, default_registry

log = logging.getLogger(__name__)

MAX_KEPT_RUNS = 50
"""Finished live runs kept in memory for the UI (older ones are read from the trace store)."""


def issue_json(issue: Issue) -> dict[str, Any]:
    return issue.to_json()


def issues_summary(issues: list[Issue]) -> str:
    """One readable paragraph of problems for error banners."""
    return "; ".join(i.format() for i in issues[:5]) + (f" (and {len(issues) - 5} more)" if len(issues) > 5 else "")


@dataclass
class _RunHandle:
    live: LiveRun
    cancel: CancelToken
    thread: threading.Thread | None = None
    owner: str | None = None
    """The visitor who started the run (share mode keeps visitors' runs apart)."""
    address: str | None = None
    """The client address it came from (share mode: one address's sessions together have a bound)."""


class StudioService:
    """Everything the browser UI may ask of the app. One instance per app; thread-safe.

    Every workflow file access goes through `path_for(name)`, and every run through the policy's checks,
    so share mode (app.share.policy) plugs in at one place."""

    def __init__(
        self,
        *,
        registry: NodeRegistry | None = None,
        provider: Callable[[Any], Any] | None = None,
        policy: SharePolicy | None = None,
        workflows_dir: Path | None = None,
        examples_dir: Path | None = None,
        models_dir: Path | None = None,
        trace_db: Path | None = None,
        trace_store: Any = None,
        pool: Any = None,
        dry_run: bool = False,
        fake_latency_s: float = 0.0,
        fake_script: FakeScript | None = None,
    ) -> None:
        self.registry = registry or default_registry()
        self.policy = policy or SharePolicy.local()
        self.workflows_dir = Path(workflows_dir or paths.workflows_dir()).expanduser()
        self.examples_dir = examples_dir if examples_dir is not None else _default_examples_dir()
        self.models_dir = Path(models_dir or paths.models_dir()).expanduser()
        self.dry_run = dry_run
        self._pool = pool
        provider = provider if provider is not None else self._default_provider(fake_latency_s, fake_script)
        folders = (self.workflows_dir, *([Path(self.examples_dir)] if self.examples_dir is not None else []))
        self.children = ChildLoader(folders, trusted=not self.policy.share_mode)
        """Where workflow nodes find their children: the workflows folder, then the examples; share mode takes
        names and paths that stay inside the folder only."""
        self.folder_ports = FolderPorts(self.registry, self.children)
        self.gallery = Gallery(Path(self.examples_dir) if self.examples_dir is not None else None, self.registry)
        """The strategy gallery's cards (the editor's first screen and New from example…)."""
        self.tune_jobs = TuneJobs(self.tune)
        """The Tune tab's tunes, each on a thread of its own."""
        self.scheduler = Scheduler(self.registry, provider, allow_python=self.policy.allow_python,
                                   children=self.children)
        self.scheduler.hide_cache_hits = self.policy.share_mode  # the prefix cache is shared by all visitors
        self.scheduler.allow_code_execution = self.policy.allow_code_execution
        self.scheduler.code_limit_caps = self.policy.code_limit_caps
        self._trace_db = Path(trace_db).expanduser() if trace_db else None
        self._trace_store = trace_store
        self._trace_error: str | None = None
        self._trace_lock = threading.Lock()
        self._versions: Any = None
        self._gate = RunGate.for_policy(self.policy)
        self.visitors = VisitorIdentities()
        """Share mode: who a browser call is for (its session, within a bound per client address)."""
        self.consent = RemoteConsent()
        """The one consent check for remote servers named by workflows from links and uploads."""
        self._runs: dict[str, _RunHandle] = {}
        self._runs_lock = threading.Lock()
        self._run_owners: dict[str, str | None] = {}
        """Who started each run of this app session (kept after the live run is forgotten, for traces)."""
        self.models = ModelCatalog(self)
        self.hub = ModelHub(self)
        self._evaluations: EvaluationService | None = None
        self.ensure_workflows_dir()

    def _default_provider(self, fake_latency_s: float, fake_script: FakeScript | None = None) -> Callable[[Any], Any]:
        """The scripted fake model for a dry run (its replies from `fake_script` when given: `--fake-script`), else
        llama.cpp through the pool with the device settings."""
        from app.run.providers import fake_provider, llama_provider

        if self.dry_run:
            kwargs = fake_script.backend_kwargs() if fake_script is not None else {}
            kwargs["latency_s"] = max(fake_latency_s, kwargs.get("latency_s", 0.0))
            return fake_provider(**kwargs)
        from app.platform.settings import with_device_settings

        return with_device_settings(llama_provider(self.pool))

    # ------------------------------------------------------------------ shared resources

    @property
    def pool(self) -> Any:
        """The app's one llama.cpp ModelPool (created on first use)."""
        if self._pool is None and not self.dry_run:
            from backends.llama.models.cpu_weights import WEIGHTS_SUBDIR
            from backends.pool import ModelPool

            self._pool = ModelPool(memory_budget_bytes=self.policy.memory_budget_bytes,  # share mode: far below
                                   weights_dir=self.models_dir / WEIGHTS_SUBDIR)  # half the RAM
        return self._pool

    @property
    def loaded_pool(self) -> Any:
        """The ModelPool if one was created, else None (never creates one)."""
        return self._pool

    @property
    def share_mode(self) -> bool:
        return self.policy.share_mode

    @property
    def run_gate(self) -> RunGate:
        """The queue every run of this app waits in (the UI's, and the /v1 API's when it is mounted here)."""
        return self._gate

    @property
    def trace_store(self) -> Any:
        """The TraceStore, opened on first use; None (with `trace_error`) when it cannot be used."""
        with self._trace_lock:  # two runs starting together must not both create the database
            return self._open_trace_store()

    def _open_trace_store(self) -> Any:
        if self._trace_store is None and self._trace_error is None:
            try:
                from app.traces.store import TraceStore

                self._trace_store = TraceStore(self._trace_db or paths.trace_db_path())
            except Exception as exc:  # the UI still edits and runs without traces
                log.warning("trace store unavailable: %s", exc)
                self._trace_error = str(exc)
        return self._trace_store

    @property
    def trace_error(self) -> str | None:
        return self._trace_error

    @property
    def versions(self) -> Any:
        """The workflows' versions (app.service.versions.WorkflowVersions) in the trace database; None when the
        database cannot be used (saves still write the file)."""
        with self._trace_lock:
            if self._versions is None:
                store = self._open_trace_store()
                if store is not None:
                    from app.service.versions import WorkflowVersions
                    from app.traces.versions import VersionStore

                    self._versions = WorkflowVersions(VersionStore(store.path), self.workflows_dir,
                                                      loader=self.children, registry=self.registry)
            return self._versions

    def _write_version(self, path: Path, text: str, message: str = "", parsed: Workflow | None = None) -> None:
        """Write a workflow file atomically and record it as a version (the file alone when versions cannot be
        kept: logged); `parsed`: the text as the caller parsed it (not parsed again)."""
        versions = self.versions
        if versions is None:
            atomic_write_text(path, text)
            return
        try:
            versions.save_text(path, text, message=message, parsed=parsed)
        except (OSError, UserError, WorkflowError):
            raise
        except Exception as exc:  # the database: the file is saved all the same, its version recorded on next load
            log.warning("saved %s; its version was not recorded: %s", path, exc)
            atomic_write_text(path, text)

    def record_versions(self, name: str | None = None) -> None:
        """Record a file changed outside the studio (or every file of the folder) as a version; never fails."""
        versions = self.versions
        if versions is None:
            return
        try:
            if name is None:
                versions.record_folder()
            else:
                versions.record_file(self.path_for(name))
        except Exception as exc:
            log.warning("could not record workflow versions: %s", exc)

    @property
    def version_panel(self) -> Any:
        """What the editor's History panel calls (app.service.version_panel.VersionPanel)."""
        from app.service.version_panel import VersionPanel

        return VersionPanel(self)

    def _record_file(self, path: Path) -> None:
        versions = self.versions
        if versions is None:
            return
        try:
            versions.record_file(path)
        except Exception as exc:
            log.warning("could not record %s as a version: %s", path, exc)

    def served_workflow_text(self, spec: str) -> tuple[str, str, dict[str, str], str | None]:
        """What the doors (app links, MCP tools, /v1 models, `auto`) serve for `NAME` or `NAME@VERSION`: (the
        file's name, the YAML, the sub-workflows' YAML by reference, the version hash or None). A pinned version,
        else the published one, else the file as saved. UserError for an unknown name or version."""
        from app.service.versions import split_ref

        name, ref = split_ref(spec)
        path = self.path_for(name)
        versions = self.versions
        if versions is not None:
            self.record_versions(name)
            if ref is not None or versions.published(path) is not None:
                version = versions.served(path, ref)
                if version is not None:
                    return path.stem, version.yaml, dict(version.children), version.version
        elif ref is not None:
            raise UserError(f"{spec!r} names a version, and this studio cannot read versions: {self._trace_error}")
        return path.stem, self.read_workflow_text(name), {}, None

    @property
    def evaluations(self) -> EvaluationService:
        """Evaluations (the Evaluate tab), created on first use next to the trace store."""
        with self._runs_lock:
            if self._evaluations is None:
                self._evaluations = EvaluationService(
                    registry=self.registry, scheduler=self.scheduler, policy=self.policy,
                    trace_store=self.trace_store, uploads_dir=paths.datasets_dir() / "uploads",
                    dry_run=self.dry_run, gate=self._gate, runs_of=self.unfinished_runs_of,
                    consent=self.consent)
            return self._evaluations

    def tune(self, options: Any, *, on_progress: Callable[[Any], None] | None = None,
             cancel: CancelToken | None = None) -> Any:
        """`metagen tune` in the caller's thread: `options` a TuneOptions, `on_progress` called with TuneProgress,
        returns a TuneResult (app.eval.tune.api); UserError for bad input."""
        from app.service.tunes import TuneService

        return TuneService(self).tune(options, on_progress=on_progress, cancel=cancel)

    def schema(self) -> list[dict[str, Any]]:
        return self.registry.schema()

    def close(self) -> None:
        self.tune_jobs.close()
        for handle in list(self._runs.values()):
            handle.cancel.cancel("the app is shutting down")
        for handle in list(self._runs.values()):
            if handle.thread is not None:
                handle.thread.join()
        if self._evaluations is not None:
            self._evaluations.close()
        if self._trace_store is not None and hasattr(self._trace_store, "close"):
            self._trace_store.close()
        if self._pool is not None and hasattr(self._pool, "close"):
            self._pool.close()

    def check_install(self, canary: bool = True) -> Any:
        """`metagen doctor`'s report (app.service.doctor.DoctorReport) for this studio's folders and model pool;
        the owner's only: it shows paths and environment settings."""
        if self.policy.share_mode:
            raise UserError("checking the install is for the owner of this app")
        from app.service.doctor import run_doctor

        return run_doctor(models_dir=self.models_dir, trace_db=self._trace_db, pool=self._pool, canary=canary)

    # ------------------------------------------------------------------ workflow files

    def path_for(self, name: str) -> Path:
        """The one place a workflow name becomes a file path (raises UserError for unusable names)."""
        try:
            return workflow_path(self.workflows_dir, name)
        except ValueError as exc:
            raise UserError(str(exc)) from None

    def ensure_workflows_dir(self) -> None:
        """On first start (no workflows folder yet) create it and copy the example workflows in."""
        if self.workflows_dir.exists():
            return
        self.workflows_dir.mkdir(parents=True, exist_ok=True)
        for example in self._example_files():
            try:
                shutil.copyfile(example, self.path_for(example.stem))
            except (OSError, UserError) as exc:
                log.warning("could not copy example %s: %s", example.name, exc)

    def _example_files(self) -> list[Path]:
        if self.examples_dir is None or not Path(self.examples_dir).is_dir():
            return []
        return sorted(Path(self.examples_dir).glob("*.yaml"))

    def list_workflows(self) -> list[str]:
        """The folder's workflow names; a file changed since it was last seen is recorded as a version."""
        self.record_versions()
        return list_workflow_names(self.workflows_dir)

    def workflow_ports(self) -> dict[str, dict[str, Any]]:
        """Each workflow of the folder with the ports a workflow node using it gets (the editor's Workflows
        palette and its workflow nodes); files that do not load are left out. Checked again only when a file of
        the folder changed (every page load asks)."""
        return self.folder_ports.ports(self.list_workflows(), self.path_for)

    def list_examples(self) -> list[str]:
        return [p.stem for p in self._example_files()]

    def read_workflow_text(self, name: str) -> str:
        from app.workflow.spec import MAX_WORKFLOW_BYTES

        path = self.path_for(name)
        try:
            size = path.stat().st_size
            if size > MAX_WORKFLOW_BYTES:
                raise UserError(f"workflow {path.stem!r} is {size:,} bytes; the limit is {MAX_WORKFLOW_BYTES:,} "
                                "bytes (keep workflows small: move long texts out of the workflow)")
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UserError(f"there is no workflow named {safe_workflow_name(name)!r} in the workflows folder; "
                            "pick one from the list") from None
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or type(exc).__name__  # str(exc) would show the file's path
            raise UserError(f"cannot read workflow {name!r}: {reason}") from None

    def read_example_text(self, name: str) -> str:
        for path in self._example_files():
            if path.stem == name:
                return path.read_text(encoding="utf-8")
        raise UserError(f"there is no example named {name!r}; pick one from the list")

    def _save_path(self, name: str) -> Path:
        """Where a workflow called `name` is saved; UserError for a model's name (reserved for /v1)."""
        from app.service.model_names import model_name_problem

        path = self.path_for(name)
        taken = model_name_problem(path.stem, self.models_dir, self.policy)
        if taken:
            raise UserError(f"not saved: {taken}")
        return path

    def save_workflow(self, name: str, data: dict[str, Any], *, overwrite: bool = True,
                      linked: Mapping[str, str] | None = None, message: str = "") -> dict[str, Any]:
        """Save editor JSON as canonical YAML, atomically, with the sub-workflows a link (or a traced run) carried
        (`linked`, name -> YAML) that the folder lacks. Refuses to overwrite when `overwrite` is False, and refuses
        the whole save, before anything is written, for what `save_refusals` finds."""
        path = self._save_path(name)
        if path.exists() and not overwrite:
            raise UserError(f"a workflow named {path.stem!r} already exists; choose another name or use Save")
        import json

        from app.workflow.spec import size_problem

        try:
            too_large = size_problem(json.dumps(data, ensure_ascii=False, default=str))
        except (TypeError, ValueError, RecursionError):
            too_large = None  # not JSON-like: workflow_from_json below says what is wrong
        if too_large:
            raise UserError(f"not saved: {too_large}")
        wf = self.workflow_from_json(data)
        text = wf.to_yaml()
        too_large = size_problem(text)
        if too_large:
            raise UserError(f"not saved: {too_large}")
        children = self.linked_children_to_save(linked or {})
        self._refuse_unsaveable(wf, linked, children)
        saved_children = self.write_children(children)  # first: the parent's version includes them
        try:
            self._write_version(path, text, message, parsed=wf)
        except OSError as exc:
            raise UserError(f"cannot save {path.name}: {exc.strerror or exc}") from None
        log.info("saved workflow %s", path)
        return {"name": path.stem, "yaml": text, "children_saved": saved_children}

    def save_yaml_text(self, name: str, text: str, *, overwrite: bool = True) -> dict[str, Any]:
        """Save YAML exactly as given (an uploaded file), after checking its size, that it parses and
        `save_refusals`."""
        from app.workflow.spec import size_problem

        if not isinstance(text, str):
            raise UserError("not saved: the upload is not text; give a workflow .yaml file")
        too_large = size_problem(text)
        if too_large:
            raise UserError(f"not saved: {too_large}")
        parsed = self.parse_yaml(text)
        if parsed["error"]:
            raise UserError(f"not saved: {parsed['error']['message']}")
        path = self._save_path(name)
        if path.exists() and not overwrite:
            raise UserError(f"a workflow named {path.stem!r} already exists; choose another name")
        uploaded = load_workflow_text(text)
        self._refuse_unsaveable(uploaded)
        self._write_version(path, text, "uploaded", parsed=uploaded)
        return {"name": path.stem}

    def save_refusals(self, wf: Workflow, linked: Mapping[str, str] | None = None,
                      children: Mapping[str, str] | None = None) -> list[Issue]:
        """What this app's policy refuses to save: the checks a run gets (`policy.tree_refusals`: python verifiers,
        candidates' code, models, caps) over `wf`'s tree of sub-workflows (`linked` first, then the folder) and
        over each sub-workflow written beside it (`children`, name -> YAML). In share mode a visitor's workflow is
        also validated as a run would be: one with errors (a route bomb, a cycle, a tree too large) is refused
        before it reaches the owner's folder (the page keeps the visitor's draft). None in local mode (the owner's
        folder is the owner's, and an unfinished workflow saves)."""
        if not self.policy.share_mode:
            return []
        loader = self.child_loader(trusted=False, linked=linked)
        memo: CheckMemo = {}
        checked = check_tree(wf, self.registry, loader, memo=memo)
        refused = errors(tree_refusals(wf, checked, self.policy))
        refused += [i for i in errors(checked.issues) if i not in refused]
        for name, text in (children or {}).items():
            try:
                child = load_workflow_text(text)
            except WorkflowError as exc:
                refused += [replace(i, file=i.file or f"{name}.yaml") for i in errors(exc.issues)]
                continue
            found = tree_refusals(child, check_tree(child, self.registry, loader, memo=memo), self.policy)
            refused += [replace(i, file=i.file or f"{name}.yaml") for i in errors(found)]
        return refused

    def _refuse_unsaveable(self, wf: Workflow, linked: Mapping[str, str] | None = None,
                           children: Mapping[str, str] | None = None) -> None:
        refused = self.save_refusals(wf, linked, children)
        if refused:
            raise UserError("not saved: this shared app saves only workflows it would run: " + issues_summary(refused))

    def linked_children_to_save(self, linked: Mapping[str, str]) -> dict[str, str]:
        """The sub-workflows a share link carried (name -> YAML) that saving its parent must write beside it: those
        not already in the folder with the same text. UserError, before anything is written, for one whose name
        a different workflow of the folder already has (never overwritten), is a model's (reserved, like a
        parent's), or that does not parse."""
        from app.workflow.spec import size_problem

        to_write: dict[str, str] = {}
        for name, text in linked.items():
            path = self.path_for(name)
            too_large = size_problem(text)
            if too_large:
                raise UserError(f"not saved: the sub-workflow {name!r}: {too_large}")
            if path.exists():
                try:
                    same = path.read_text(encoding="utf-8") == text
                except (OSError, UnicodeDecodeError):
                    same = False
                if not same:
                    raise UserError(f"not saved: this workflow uses the sub-workflow {name!r} from its link, and your "
                                    f"folder already has a different workflow named {path.stem!r}; rename or move "
                                    "yours, then save again")
                continue
            try:
                self._save_path(name)
            except UserError as exc:
                raise UserError(f"{exc} (the sub-workflow {name!r} this workflow carries)") from None
            parsed = self.parse_yaml(text)
            if parsed["error"]:
                raise UserError(f"not saved: the sub-workflow {name!r}: {parsed['error']['message']}")
            to_write[path.stem] = text
        return to_write

    def write_children(self, texts: Mapping[str, str]) -> list[str]:
        """Write the sub-workflows `linked_children_to_save` chose (each atomically); the names written."""
        written = []
        for name, text in texts.items():
            path = self.path_for(name)
            try:
                self._write_version(path, text, "saved with a workflow that uses it")
            except OSError as exc:
                raise UserError(f"cannot save the sub-workflow {path.name}: {exc.strerror or exc}") from None
            log.info("saved sub-workflow %s with its parent", path)
            written.append(path.stem)
        return written

    # ------------------------------------------------------------------ YAML <-> editor JSON

    def workflow_from_json(self, data: Any) -> Workflow:
        if not isinstance(data, dict):
            raise UserError("the editor sent no workflow (expected a JSON object); reload the page")
        try:
            return workflow_from_dict(data)
        except WorkflowError as exc:
            raise UserError(issues_summary(exc.issues)) from None

    def child_loader(self, *, trusted: bool = True, linked: Mapping[str, str] | None = None) -> ChildLoader:
        """Where a workflow's children are found: the app's loader, by name or inner path only when the workflow
        is not `trusted` (a link, an upload), with `linked` (the sub-workflows a share link carried, checked by
        deeplink.check_link_children) taking precedence over the folder for this workflow only."""
        if trusted and not linked:
            return self.children
        return replace(self.children, trusted=False, texts=dict(linked or {}))

    def linked_workflow_ports(self, children: Mapping[str, str]) -> dict[str, dict[str, Any]]:
        """The ports of the workflow nodes using each child a link (or a traced run) carried: the editor draws them
        instead of the folder's; a child that does not load is left out."""
        loader = self.child_loader(trusted=False, linked=children)
        ports: dict[str, dict[str, Any]] = {}
        memo: CheckMemo = {}  # each linked child checked once, however many of the others use it
        for name, text in children.items():
            with contextlib.suppress(WorkflowError):
                wf = load_workflow_text(text)
                ports[name] = workflow_ports(wf, check_tree(wf, self.registry, loader, memo=memo))
        return ports

    def check(self, wf: Workflow, children: ChildLoader | None = None) -> list[Issue]:
        """Validation problems plus what the policy refuses (share mode), over the whole tree of sub-workflows
        (found through `children`, else the app's loader)."""
        checked = check_tree(wf, self.registry, children or self.children)
        # share mode refuses Hub models (tree_refusals); the owner hears of one not pulled yet when opening it
        unpulled = [] if self.policy.share_mode else unpulled_warnings(wf, Path(self.models_dir))
        return checked.issues + tree_refusals(wf, checked, self.policy) + unpulled

    def describe(self, wf: Workflow, children: ChildLoader | None = None) -> dict[str, Any]:
        """The editor's view of a workflow: JSON for the canvas, canonical YAML and the problems."""
        return {
            "workflow": wf.to_dict(),
            "yaml": wf.to_yaml(),
            "issues": [issue_json(i) for i in self.check(wf, children)],
            "inputs": {name: {"type": s.type, "default": s.default, "description": s.description}
                       for name, s in wf.inputs.items()},
        }

    def from_editor(self, data: Any, children: ChildLoader | None = None) -> dict[str, Any]:
        """Canvas JSON -> canonical YAML + issues (the canvas -> YAML direction)."""
        return self.describe(self.workflow_from_json(data), children)

    def parse_yaml(self, text: str, children: ChildLoader | None = None) -> dict[str, Any]:
        """YAML text -> canvas JSON + issues, or `error` {message, line} (the YAML -> canvas direction).
        A syntax error never loses anything: the caller keeps its text and canvas."""
        try:
            wf = load_workflow_text(text)
        except WorkflowError as exc:
            first = exc.issues[0]
            return {"error": {"message": first.message + (f" ({first.hint})" if first.hint else ""),
                              "line": first.line, "code": first.code},
                    "issues": [issue_json(i) for i in exc.issues]}
        return {**self.describe(wf, children), "error": None}

    def open_workflow(self, name: str) -> dict[str, Any]:
        """A saved workflow for the editor; the YAML is the file's text as saved (recorded as a version when it
        changed outside the studio)."""
        text = self.read_workflow_text(name)
        self.record_versions(name)
        result = self.parse_yaml(text)
        result["yaml"] = text
        result["name"] = self.path_for(name).stem
        return result

    def open_example(self, name: str) -> dict[str, Any]:
        """An example for the editor, with its sub-workflows as found among the examples (`children`, by name, and
        their ports `children_ports`): the page sends them back with each check and run, like a link's, so a
        workflow of the folder named like an example's child never stands in for it."""
        text = self.read_example_text(name)
        children = self.example_children(text)
        loader = self.child_loader(trusted=False, linked=children) if children else None
        result = self.parse_yaml(text, loader)
        result["yaml"] = text
        result["name"] = name
        result["children"] = children
        result["children_ports"] = {}
        for ref, child_text in children.items() if loader is not None else ():
            try:
                child = load_workflow_text(child_text)
            except WorkflowError:
                continue
            result["children_ports"][ref] = workflow_ports(child, check_tree(child, self.registry, loader))
        return result

    def example_children(self, text: str) -> dict[str, str]:
        """The sub-workflows an example's workflow nodes name, found among the examples (never the workflows
        folder), by the name they are written as."""
        if self.examples_dir is None:
            return {}
        try:
            wf = load_workflow_text(text)
        except WorkflowError:
            return {}
        if not any(node.kind in CHILD_KINDS for node in wf.nodes):
            return {}
        loader = ChildLoader((Path(self.examples_dir),), trusted=False)
        return {ref: yaml for ref, yaml in workflow_texts(wf, check_tree(wf, self.registry, loader)).items()
                if "/" not in ref and "\\" not in ref}

    # ------------------------------------------------------------------ runs

    def start_run(self, data: Any, inputs: dict[str, Any] | None = None, seed: int = 0,
                  budget: Budget | None = None, *, visitor: str | None = None, trusted: bool = True,
                  linked: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Validate, then queue the run on a worker thread; returns its first snapshot at once.
        The run belongs to `visitor`: in share mode only that visitor sees, reads or cancels it. A workflow that is
        not `trusted` (from a link or an upload) finds its sub-workflows by name or inner path only, those a share
        link carried (`linked`) first."""
        wf = self.workflow_from_json(data)
        children = self.child_loader(trusted=trusted, linked=linked)
        problems = errors(self.check(wf, children))
        if problems:
            raise UserError("the workflow has problems; fix them first: " + issues_summary(problems))
        wf = resolve_model_choices(wf, self.policy)
        too_large = inputs_problem(inputs if isinstance(inputs, dict) else {}, self.policy)
        if too_large:  # before anything is copied, stored or traced
            raise UserError(too_large)
        missing = required_problem(wf, inputs if isinstance(inputs, dict) else {})
        if missing:  # an empty question ran for 17 s on nothing
            raise UserError(missing)
        try:
            values = resolve_inputs(wf, _clean_inputs(wf, inputs or {}))
        except WorkflowError as exc:
            raise UserError(issues_summary(exc.issues)) from None
        try:
            seed = int(seed)
        except (TypeError, ValueError):
            raise UserError(f"the seed must be a whole number, got {seed!r}") from None
        budget = self.policy.cap_budget(budget) if self.policy.share_mode else (budget or Budget())
        with self._runs_lock:
            mine = self._unfinished_runs_of(visitor)
            limit = self.policy.max_runs_per_visitor
            if limit is not None and visitor is not None and mine >= limit:
                raise UserError(f"you already have {mine} run(s) going on this shared app (the limit is {limit}); "
                                "wait for one to finish or cancel one")
            address = self.visitors.address_of(visitor) if self.policy.share_mode else None
            self._check_address_room(address)
            try:  # the run's queue place, taken now: its thread comes to the gate later (_work)
                self._gate.reserve()
            except QueueFullError as exc:
                raise UserError(str(exc)) from None
            run_id = uuid.uuid4().hex[:12]
            handle = _RunHandle(LiveRun(run_id, wf.name, [n.id for n in wf.nodes]), CancelToken(),
                                owner=visitor, address=address)
            self._runs[run_id] = handle
            self._run_owners[run_id] = visitor
            self._forget_old_runs()
        handle.thread = threading.Thread(target=self._work, args=(handle, wf, values, seed, budget, children),
                                         name=f"run-{run_id}", daemon=True)
        try:
            handle.thread.start()
        except RuntimeError:  # no thread to be had: the run ends and gives its queue place back
            self._gate.cancel_reservation()
            handle.live.finish(FAILED, error="the studio could not start a thread for this run; try again")
            raise UserError("the studio could not start a thread for this run; try again in a moment") from None
        return self.run_status(run_id, visitor=visitor)

    def run_workflow(self, wf: Workflow, inputs: dict[str, Any] | None = None, *, seed: int = 0,
                     budget: Budget | None = None, observers: Sequence[Any] = (), trace: bool = True,
                     cancel: CancelToken | None = None) -> RunResult:
        """Run in the caller's thread (the Python API) with `start_run`'s checks, queue and trace store; raises
        WorkflowError before any model loads when the workflow or its inputs are invalid. Ctrl+C cancels it."""
        problems = errors(self.check(wf))
        if problems:
            raise WorkflowError(problems)
        wf = resolve_model_choices(wf, self.policy)
        cancel = cancel or CancelToken()
        budget = self.policy.cap_budget(budget) if self.policy.share_mode else (budget or Budget())
        store = self.trace_store if trace else None
        if store is not None and wf.source is not None:  # a file run from Python: changed since? a version now
            self._record_file(Path(wf.source))
        watchers = [*observers, *([store] if store is not None else [])]
        token = cancel

        def work() -> RunResult:
            with self._gate.slot(cancelled=lambda: token.cancelled):
                return self.scheduler.run(wf, inputs or {}, seed=seed, budget=budget, cancel=token,
                                          observers=watchers)

        return wait_interruptibly(work, lambda: token.cancel("interrupted"), "run")

    def trace_record(self, run_id: str) -> dict[str, Any]:
        """A traced run's full record (its id or an unambiguous prefix), after pending trace writes land."""
        store = self.trace_store
        if store is None:
            raise UserError(f"the trace database cannot be used: {self.trace_error}")
        store.flush()
        try:
            return store.get_run(run_id)
        except Exception as exc:  # TraceStoreError: unknown or ambiguous id
            raise UserError(str(exc)) from None

    def list_traces(self, limit: int = 100) -> list[dict[str, Any]]:
        """The newest traced runs first, as the Traces tab lists them."""
        store = self.trace_store
        if store is None:
            raise UserError(f"the trace database cannot be used: {self.trace_error}")
        store.flush()
        return store.list_runs(limit=limit)

    def _work(self, handle: _RunHandle, wf: Workflow, values: dict[str, Any], seed: int, budget: Budget,
              children: ChildLoader | None = None) -> None:
        live, cancel = handle.live, handle.cancel
        try:
            # its queue place reserved by start_run: runs and evaluations admitted since never overfill the queue,
            # and none of them turns an accepted run into a "busy" failure
            with self._gate.slot(cancelled=lambda: cancel.cancelled, reserved=True):
                if cancel.cancelled:
                    live.finish(CANCELLED, error="cancelled before it started")
                    return
                live.mark_running()
                live.expected_s = self._expected_s(wf)
                observers: list[Any] = [live]
                store = self.trace_store
                if store is not None:
                    observers.append(store)
                result: RunResult = self.scheduler.run(wf, values, seed=seed, budget=budget, cancel=cancel,
                                                       observers=observers, run_id=live.run_id, children=children)
            live.finish(result.status, outputs=_jsonable(result.outputs), error=_friendly_error(result),
                        stats=result.stats.to_json())
        except QueueFullError as exc:
            live.finish(CANCELLED if cancel.cancelled else FAILED, error=str(exc))
        except WorkflowError as exc:
            live.finish(INVALID, error=issues_summary(exc.issues))
        except Exception as exc:
            log.exception("run %s crashed", live.run_id)
            live.finish(FAILED, error=f"the run stopped on an unexpected error: {type(exc).__name__}: {exc}")

    def _expected_s(self, wf: Workflow) -> float | None:
        """The run's expected seconds from the speed measured here for its first model (the run loads that model
        anyway); None when this model's speed was never measured or the workflow names no model."""
        from app.eval.estimate import load_calibration, run_expected_s
        from app.workflow.model_specs import model_specs

        try:
            spec = next(iter(model_specs(wf).values()), None)
            if spec is None:
                return None
            return run_expected_s(wf, self.registry, load_calibration(self.scheduler.provider(spec).model_id))
        except Exception as exc:  # the estimate is a nicety: the run reports its own problems
            log.debug("no estimate for run of %s: %s", wf.name, exc)
            return None

    def _unfinished_runs_of(self, visitor: str | None) -> int:
        """Runs and evaluations `visitor` has going (call with `_runs_lock` held)."""
        runs = sum(1 for h in self._runs.values() if h.owner == visitor and not h.live.finished)
        return runs + (self._evaluations.unfinished_of(visitor) if self._evaluations is not None else 0)

    def _check_address_room(self, address: str | None) -> None:
        """UserError when the sessions of one client address together have as many unfinished runs as one address
        may (call with `_runs_lock` held): new session ids are free, so one client could fill the queue."""
        limit = runs_per_address(self.policy)
        if address is None or limit is None:
            return
        theirs = sum(1 for h in self._runs.values() if h.address == address and not h.live.finished)
        if theirs >= limit:
            raise UserError(f"{theirs} runs from your network address are going on this shared app (the limit is "
                            f"{limit}); wait for one to finish or cancel one")

    def unfinished_runs_of(self, visitor: str | None) -> int:
        """Runs and evaluations `visitor` has going: together they count against the per-visitor limit."""
        with self._runs_lock:
            return self._unfinished_runs_of(visitor)

    def _forget_old_runs(self) -> None:
        finished = [rid for rid, h in self._runs.items() if h.live.finished]
        for rid in finished[: max(0, len(finished) - MAX_KEPT_RUNS)]:
            del self._runs[rid]

    def _visible(self, handle: _RunHandle, visitor: str | None) -> bool:
        """The owner (local mode) sees every run; a share-mode visitor only the runs it started (None is the
        app's own callers: the CLI, tests; browser calls always carry their Gradio session)."""
        return not self.policy.share_mode or handle.owner == visitor

    def owns_run(self, run_id: str, visitor: str | None) -> bool:
        """Whether `visitor` may see run `run_id` (any run in local mode; in share mode one it started here)."""
        if not self.policy.share_mode:
            return True
        if run_id in self._run_owners and self._run_owners[run_id] == visitor:
            return True
        return self._evaluations is not None and self._evaluations.owns_run(run_id, visitor)

    def visitor_run_ids(self, visitor: str | None) -> set[str] | None:
        """The run ids `visitor` may see in the traces: None (all of them) in local mode."""
        if not self.policy.share_mode:
            return None
        with self._runs_lock:
            mine = {rid for rid, owner in self._run_owners.items() if owner == visitor}
        if self._evaluations is not None:  # the runs of the visitor's own evaluations
            mine |= self._evaluations.visitor_run_ids(visitor) or set()
        return mine

    def _handle(self, run_id: str, visitor: str | None = None) -> _RunHandle:
        handle = self._runs.get(run_id)
        if handle is None or not self._visible(handle, visitor):
            raise UserError(f"no live run {run_id!r} (it may be older than this app session; see the Traces tab)")
        return handle

    def run_status(self, run_id: str, *, visitor: str | None = None) -> dict[str, Any]:
        if run_id not in self._runs and not self.policy.share_mode:  # a page open across a restart asks for it
            ended = ended_run_snapshot(self.trace_store, run_id)
            if ended is not None:
                return ended
        handle = self._handle(run_id, visitor)
        snap = handle.live.snapshot()
        if snap["status"] == QUEUED:
            with self._runs_lock:
                queued = [h.live.run_id for h in self._runs.values() if h.live.status == QUEUED]
            snap["queue_position"] = queued.index(run_id) + 1 if run_id in queued else 0
        if snap["finished"]:
            snap["output_views"] = output_views(snap["outputs"])
        return snap

    def cancel_run(self, run_id: str, *, visitor: str | None = None) -> dict[str, Any]:
        handle = self._handle(run_id, visitor)
        if not handle.live.finished:
            handle.cancel.cancel("cancelled by the user")
        return self.run_status(run_id, visitor=visitor)

    def wait_run(self, run_id: str, timeout: float | None = None, *, visitor: str | None = None) -> dict[str, Any]:
        """Block until the run ends (tests and the CLI); returns the final snapshot."""
        handle = self._handle(run_id, visitor)
        if handle.thread is not None:
            handle.thread.join(timeout)
        return self.run_status(run_id, visitor=visitor)

    def active_runs(self, *, visitor: str | None = None) -> list[dict[str, Any]]:
        """Unfinished runs: all of them for the owner (local mode), a visitor's own in share mode."""
        with self._runs_lock:
            handles = [h for h in self._runs.values() if self._visible(h, visitor)]
        return [self.run_status(h.live.run_id, visitor=visitor) for h in handles if not h.live.finished]

    def node_outputs(self, run_id: str, node_id: str, *, visitor: str | None = None) -> dict[str, Any]:
        """A node's outputs from a live run, as table-ready views (see `output_views`)."""
        outputs = self._handle(run_id, visitor).live.outputs_of(node_id)
        if outputs is None:
            raise UserError(f"node {node_id!r} has no outputs in this run (it has not finished, or failed)")
        return {"node_id": node_id, "views": output_views(outputs)}


def _default_examples_dir() -> Path | None:
    from app.platform.resources import examples_dir

    try:
        return examples_dir()
    except FileNotFoundError:
        return None


def _clean_inputs(wf: Workflow, given: dict[str, Any]) -> dict[str, Any]:
    """Form values: drop unknown names and empty optional fields (so defaults apply)."""
    out: dict[str, Any] = {}
    for name, value in given.items():
        spec = wf.inputs.get(name)
        if spec is None:
            continue
        if value is None or (isinstance(value, str) and value.strip() == "" and spec.type != "text"):
            continue
        out[name] = value
    return out


def _jsonable(value: Any) -> Any:
    from nodes.base import to_jsonable

    return to_jsonable(value)


def _friendly_error(result: RunResult) -> str | None:
    if result.status == SUCCEEDED:
        return None
    if result.failure is not None:
        f = result.failure
        return f"node {f.node_id!r} ({f.kind}) failed: {f.message}"
    return result.error


# ---------------------------------------------------------------------- output views


def output_views(outputs: dict[str, Any]) -> list[dict[str, Any]]:
    """Each output port as a view: candidate sets as table rows (text, answer, score, cluster, winner),
    other values as text (a tool-call answer with its calls in `tool_answer`: app.service.tool_answers)."""
    views: list[dict[str, Any]] = []
    for port, value in outputs.items():
        if isinstance(value, dict) and value.get("__type__") == "candidates":
            winner = value.get("winner")
            rows = []
            for i, cand in enumerate(value.get("candidates") or []):
                score = cand.get("score")
                rows.append({
                    "index": i,
                    "text": str(cand.get("text", "")),
                    "answer": cand.get("answer"),
                    "score": round(score, 4) if isinstance(score, int | float) else None,
                    "cluster": cand.get("cluster"),
                    "winner": i == winner,
                    **({"tool_answer": t} if (t := tool_answer_json(cand.get("text"))) is not None else {}),
                })
            views.append({"port": port, "type": "candidates", "rows": rows, "winner": winner})
        else:
            import json

            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2)
            view: dict[str, Any] = {"port": port, "type": "value", "text": text}
            tool_answer = tool_answer_json(value)
            if tool_answer is not None:  # calls shown as calls, not as their answer JSON
                view["tool_answer"] = tool_answer
            views.append(view)
    return views


# ---------------------------------------------------------------------- models


