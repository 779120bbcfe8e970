"""The editor's History panel on the service: a workflow's versions with run counts and best figures, a version as
a read-only canvas, the diff of two, restore, names and publishing (owner-only changes in share mode)."""

from __future__ import annotations

from typing import Any

from app.service.errors import UserError


class VersionPanel:
    """The History panel's calls, all by workflow name (`ref`: a hash or its prefix, a version name, `-1`,
    `latest`, `published`). Reads work for everyone; restore, names and publishing are the owner's."""

    def __init__(self, service: Any) -> None:
        self.service = service

    def _owned_versions(self, what: str) -> Any:
        """The versions, for an owner's change (`what`): share mode's visitors only read them."""
        if self.service.policy.share_mode:
            raise UserError(f"{what} is for the owner of this app")
        return self._readable_versions()

    def _readable_versions(self) -> Any:
        versions = self.service.versions
        if versions is None:
            raise UserError("versions are kept in the trace database, which cannot be opened: "
                            f"{self.service.trace_error}")
        return versions

    def workflow_history(self, name: str) -> list[dict[str, Any]]:
        """The workflow's versions, newest first: {version, name, message, created_at, runs, best, parent,
        published, current} (the file recorded first when it changed)."""
        return self._readable_versions().history(self.service.path_for(name))

    def open_version(self, name: str, ref: str | None = None) -> dict[str, Any]:
        """A recorded version for a read-only preview on the canvas: what `open_workflow` returns, drawn from the
        version's YAML with its own sub-workflows, plus {version, message, created_at, label, read_only: True}."""
        version = self._readable_versions().get(self.service.path_for(name), ref)
        result = self.service.parse_yaml(version.yaml, self.service.child_loader(trusted=False, linked=version.children)
                                 if version.children else None)
        result.update(yaml=version.yaml, name=self.service.path_for(name).stem, version=version.version,
                      message=version.message, created_at=version.created_at, label=version.label,
                      children=dict(version.children), read_only=True)
        return result

    def diff_versions(self, name: str, ref_a: str, ref_b: str | None = None) -> dict[str, Any]:
        """The semantic diff from version `ref_a` to `ref_b` (None: the latest) with `lines`, the readable form:
        nodes added / removed / retyped / renamed, params old -> new, edges, inputs, outputs, sub-workflows."""
        from app.workflow.diff import diff_lines

        diff = self._readable_versions().diff(self.service.path_for(name), ref_a, ref_b)
        return {**diff, "lines": diff_lines(diff)}

    def restore_version(self, name: str, ref: str, message: str = "") -> dict[str, Any]:
        """Write version `ref` back to the file and the sub-workflow files it used (each current file recorded
        first); the restored workflow as `open_workflow` returns it, with `restored_subworkflows` rewritten."""
        _, children = self._owned_versions("restoring a version").restore_tree(self.service.path_for(name), ref,
                                                                               message=message)
        return {**self.service.open_workflow(name), "restored_subworkflows": sorted(c.stem for c in children)}

    def name_version(self, name: str, ref: str, label: str | None) -> dict[str, Any]:
        """Name a version (None or "" removes its name); the version's {version, label}."""
        version = self._owned_versions("naming a version").set_name(self.service.path_for(name), ref, label)
        return {"version": version.version, "label": version.label}

    def publish_version(self, name: str, ref: str | None = None) -> dict[str, Any]:
        """Publish version `ref` (None: the file as saved now) for app links, MCP tools, /v1 and `auto`."""
        version = self._owned_versions("publishing a version").publish(self.service.path_for(name), ref)
        return {"workflow": self.service.path_for(name).stem, "version": version.version}

    def unpublish_version(self, name: str) -> bool:
        return bool(self._owned_versions("unpublishing a version").unpublish(self.service.path_for(name)))

    def run_version(self, run_id: str) -> dict[str, Any] | None:
        """"Open the version this ran" for a traced run: {workflow, version} of the recorded version whose hash
        the run carries (its workflow file's first), or None when no save recorded it."""
        store = self.service.trace_store
        versions = self.service.versions
        if store is None or versions is None:
            return None
        run = store.get_run(run_id)["run"]
        version = versions.of_run(run.get("workflow_hash") or "")
        return {"workflow": version.workflow, "version": version.version} if version is not None else None

