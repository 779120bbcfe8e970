"""Consent to remote servers: a workflow from a link or an upload reaches another server only once its user agreed."""

from __future__ import annotations

import threading

from app.share.policy import remote_models
from app.workflow.spec import Workflow

UNTRUSTED_ORIGINS = ("link", "upload", "editor")
"""Where a workflow came from when what it would do (python code, remote servers) must be confirmed first:
`editor` is the editor's current text as another tab reads it, whose origin the server cannot tell. A workflow
file of the owner's folder, an example, the CLI's and the Python API's workflows are the owner's own."""


class RemoteConsentError(ValueError):
    """The workflow sends prompts to servers its user has not agreed to; `remote` lists them."""

    def __init__(self, remote: list[dict[str, str]], doing: str) -> None:
        self.remote = remote
        servers = "; ".join(_describe(r) for r in remote)
        super().__init__(f"not {doing}: this workflow came from a link or an upload and sends prompts to another "
                         f"server ({servers}). Run it once in the Editor tab and confirm there, or save it as a "
                         "workflow of your own, then try again")


def _describe(target: dict[str, str]) -> str:
    key = f", API key from ${target['api_key_env']}" if target.get("api_key_env") else ""
    return f"{target.get('base_url') or '?'} model {target.get('model') or '?'}{key}"


def _key(target: dict[str, str]) -> tuple[str, str, str]:
    return (target.get("base_url", ""), target.get("model", ""), target.get("api_key_env", ""))


class RemoteConsent:
    """The one consent check for remote servers, for every path that can reach a model from the browser (the
    editor's Run, the Evaluate tab's Estimate and Start). A (server, model, key variable) its user agreed to, or
    that came from a trusted origin, is remembered for that visitor for the app's lifetime."""

    def __init__(self) -> None:
        self._agreed: dict[str, set[tuple[str, str, str]]] = {}
        self._lock = threading.Lock()

    def agree(self, wf: Workflow, visitor: str | None) -> None:
        """Remember `wf`'s remote servers as agreed to by `visitor`."""
        keys = {_key(t) for t in remote_models(wf)}
        if keys:
            with self._lock:
                self._agreed.setdefault(visitor or "", set()).update(keys)

    def missing(self, wf: Workflow, visitor: str | None) -> list[dict[str, str]]:
        """`wf`'s remote servers `visitor` has not agreed to (empty when it names none)."""
        with self._lock:
            agreed = set(self._agreed.get(visitor or "", ()))
        return [t for t in remote_models(wf) if _key(t) not in agreed]

    def require(self, wf: Workflow, visitor: str | None, *, origin: str | None, confirmed: bool = False,
                doing: str = "run") -> None:
        """Raise RemoteConsentError when `wf`, from `origin`, would reach a server `visitor` has not agreed to;
        a trusted origin or `confirmed` counts as agreement (and is remembered)."""
        if confirmed or origin not in UNTRUSTED_ORIGINS:
            self.agree(wf, visitor)
            return
        missing = self.missing(wf, visitor)
        if missing:
            raise RemoteConsentError(missing, doing)

