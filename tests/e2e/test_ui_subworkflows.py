"""Sub-workflows on the editor page (Chromium against `metagen ui --dry-run`): make one from a selection, open it,
edit and save it, go back to the parent, run the parent; no console errors."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.e2e

SERVER_ARGS = ["--dry-run"]


def test_make_open_edit_return_and_run_a_sub_workflow(ui: Any, shot: Any, studio: Any) -> None:
    page = ui.page
    ui.open_example("chain_of_thought")
    ui.save_as("parent_cot")
    page.locator("[data-node-id=think] .mge-node-title").click()
    page.locator("[data-node-id=answer] .mge-node-title").click(modifiers=["Shift"])
    page.locator("[data-testid=editor-make-subworkflow]").click()
    page.locator("[data-testid=subworkflow-name]").fill("cot_steps")  # names inferred from the cut wires, editable
    assert page.locator("[data-testid=subworkflow-input-question]").input_value() == "question"
    page.locator("[data-testid=subworkflow-output-text]").fill("answer")
    page.locator("[data-testid=subworkflow-output-text_2]").fill("reasoning")
    shot(page, "naming")
    page.locator("[data-testid=subworkflow-ok]").click()
    page.wait_for_function("window.MetagenUI.editor().getWorkflow().nodes.some(n => n.kind === 'workflow')")
    shot(page, "made")
    child_file = studio.home / "workflows" / "cot_steps.yaml"
    child = yaml.safe_load(child_file.read_text(encoding="utf-8"))
    assert sorted(n["id"] for n in child["nodes"]) == ["answer", "think"]
    assert child["inputs"] == {"question": {"type": "text"}}
    assert child["outputs"] == {"answer": "answer.text", "reasoning": "think.text"}
    parent = ui.wait_yaml(lambda t: "kind: workflow" in t and "workflow: cot_steps" in t)
    (node,) = yaml.safe_load(parent)["nodes"]
    assert node["inputs"] == {"question": "inputs.question"}
    wid = node["id"]
    assert yaml.safe_load(parent)["outputs"] == {"answer": f"{wid}.answer", "reasoning": f"{wid}.reasoning"}
    assert page.locator('.mge-palette [data-workflow="cot_steps"]').count() == 1

    page.locator(f"[data-node-id={node['id']}] .mge-node-title").dblclick()
    page.wait_for_function("document.querySelector('[data-testid=wf-title]').textContent === 'cot_steps'")
    assert page.locator("[data-testid=subworkflow-breadcrumb]").is_visible()
    assert "parent_cot" in page.locator("[data-testid=subworkflow-back]").inner_text()
    ui.select("answer")
    ui.set_param("max_tokens", "12")
    ui.wait_yaml(lambda t: "max_tokens: 12" in t)
    page.locator("[data-testid=save-btn]").click()
    page.wait_for_function("document.querySelector('[data-testid=notice]').textContent.startsWith('Saved')")
    assert "max_tokens: 12" in child_file.read_text(encoding="utf-8")
    shot(page, "child")

    page.locator("[data-testid=subworkflow-back]").click()
    page.wait_for_function("document.querySelector('[data-testid=wf-title]').textContent === 'parent_cot'")
    page.locator("[data-testid=subworkflow-breadcrumb]").wait_for(state="hidden")
    assert [n["kind"] for n in ui.workflow()["nodes"]] == ["workflow"]
    page.locator(f"[data-node-id={node['id']}].mge-child-changed").wait_for()  # its child was edited and saved
    ui.click_run()
    assert ui.wait_run_finished() == "succeeded"
    assert ui.node_state(node["id"]) in ("done", "cached")
    shot(page, "ran")


def _make_from_think_and_answer(ui: Any, name: str) -> None:
    page = ui.page
    page.locator("[data-node-id=think] .mge-node-title").click()
    page.locator("[data-node-id=answer] .mge-node-title").click(modifiers=["Shift"])
    page.locator("[data-testid=editor-make-subworkflow]").click()
    page.locator("[data-testid=subworkflow-name]").fill(name)
    page.locator("[data-testid=subworkflow-ok]").click()
    page.wait_for_function("window.MetagenUI.editor().getWorkflow().nodes.some(n => n.kind === 'workflow')")


def test_undoing_make_sub_workflow_offers_to_delete_the_unchanged_file(ui: Any, studio: Any) -> None:
    page = ui.page
    ui.open_example("chain_of_thought")
    _make_from_think_and_answer(ui, "undo_me")
    child_file = studio.home / "workflows" / "undo_me.yaml"
    assert child_file.exists()
    asked: list[str] = []

    def accept(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.accept()

    page.once("dialog", accept)
    page.locator("[data-testid=editor-undo]").click()
    page.wait_for_function("document.querySelector('[data-testid=notice]').textContent.includes('Deleted undo_me')")
    assert asked and "undo_me.yaml" in asked[0] and not child_file.exists()
    assert sorted(n["id"] for n in ui.workflow()["nodes"]) == ["answer", "think"]
    assert page.locator('.mge-palette [data-workflow="undo_me"]').count() == 0

    # a child changed since it was written is kept, without asking
    _make_from_think_and_answer(ui, "keep_me")
    kept = studio.home / "workflows" / "keep_me.yaml"
    kept.write_text(kept.read_text(encoding="utf-8").replace("name: keep_me", "name: keep_me_edited"),
                    encoding="utf-8")
    page.on("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    page.locator("[data-testid=editor-undo]").click()
    page.wait_for_function("!window.MetagenUI.editor().getWorkflow().nodes.some(n => n.kind === 'workflow')")
    page.wait_for_function("!window.MetagenSubworkflows.made().includes('keep_me')")  # the file was looked at
    assert len(asked) == 1 and kept.exists()


def test_redo_after_an_undo_that_deleted_the_child_writes_the_file_again(ui: Any, studio: Any) -> None:
    page = ui.page
    ui.open_example("chain_of_thought")
    _make_from_think_and_answer(ui, "redo_me")
    child_file = studio.home / "workflows" / "redo_me.yaml"
    written = child_file.read_text(encoding="utf-8")
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("[data-testid=editor-undo]").click()
    page.wait_for_function("document.querySelector('[data-testid=notice]').textContent.includes('Deleted redo_me')")
    assert not child_file.exists()
    page.locator("[data-testid=editor-redo]").click()
    page.wait_for_function("document.querySelector('[data-testid=notice]').textContent.includes('Wrote redo_me')")
    assert child_file.read_text(encoding="utf-8") == written
    assert page.locator('.mge-palette [data-workflow="redo_me"]').count() == 1
    ui.click_run()  # the redone workflow node finds its child again
    assert ui.wait_run_finished() == "succeeded"
