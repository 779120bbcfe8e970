"""First steps of a new user on the editor page (`metagen ui --dry-run`): an example is titled by its own name
and saved under it by default, and a run refused for problems says so briefly and clears once they are fixed."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.e2e

SERVER_ARGS = ["--dry-run"]


def title(ui: Any) -> str:
    return ui.page.locator("[data-testid=wf-title]").inner_text().strip()


def test_an_empty_start_shows_no_error_and_run_says_what_to_do(ui: Any, shot: Any) -> None:
    assert title(ui) == "untitled"
    assert ui.page.locator("[data-testid=issue-count]").inner_text() == "0"  # no red 'no outputs' on arrival
    assert ui.page.locator("[data-testid=issues] li").count() == 0
    ui.page.locator("[data-testid=run-btn]").click()
    assert "This workflow is empty" in ui.notice() and "New from example" in ui.notice()
    shot(ui.page, "empty-start")
    ui.open_example("chain_of_thought")
    assert ui.notice().startswith("New workflow from the example")


def test_an_example_is_titled_and_saved_under_its_own_name(ui: Any, shot: Any) -> None:
    assert title(ui) == "untitled"
    ui.open_example("self_consistency")
    assert title(ui) == "self-consistency"  # the workflow's `name:`, not "untitled"
    ui.page.locator("[data-testid=save-btn]").click()
    name_input = ui.page.locator("[data-testid=name-input]")
    name_input.wait_for(state="visible")
    # a free file name from the workflow name (the examples are already in a new user's workflows folder)
    assert name_input.input_value() == "self_consistency_2"
    shot(ui.page, "save-prompt")
    ui.page.locator("[data-testid=name-ok]").click()
    ui.page.wait_for_function("document.querySelector('[data-testid=notice]').textContent.startsWith('Saved')")
    assert title(ui) == "self_consistency_2"
    assert (ui.server.home / "workflows" / "self_consistency_2.yaml").exists()

    # renaming the workflow in the YAML retitles an unsaved copy
    ui.page.locator("[data-testid=new-btn]").click()
    ui.page.locator("[data-testid=yaml-editor]").fill(
        "version: 1\nname: my-experiment\nnodes: []\noutputs: {}\n")
    ui.page.wait_for_function("document.querySelector('[data-testid=wf-title]').textContent === 'my-experiment'")


def test_a_run_refused_for_problems_says_so_briefly_and_the_banner_clears_once_fixed(ui: Any, shot: Any) -> None:
    ui.open_example("self_consistency")
    editor = ui.page.locator("[data-testid=yaml-editor]")
    valid = editor.input_value()
    editor.fill(valid.replace("n: 8", "n: -2"))
    ui.page.wait_for_function("document.querySelector('[data-testid=issue-count]').textContent === '1'")
    ui.page.locator("[data-testid=run-btn]").click()
    notice = ui.page.locator("[data-testid=notice]")
    assert notice.inner_text().startswith("Fix the problem listed under Problems")
    assert "Fix the problem" in ui.page.locator("[data-testid=run-status]").inner_text()
    assert ui.page.evaluate("window.MetagenUI.state().currentRun") in (None, "")  # nothing was started
    shot(ui.page, "refused")
    editor.fill(valid)
    ui.page.wait_for_function("document.querySelector('[data-testid=issue-count]').textContent === '0'")
    assert notice.inner_text().strip() == ""
    assert "ready to run" in ui.page.locator("[data-testid=run-status]").inner_text()
    ui.click_run()
    assert ui.wait_run_finished(60) == "succeeded"


def test_a_number_input_too_large_is_refused_not_silently_replaced_by_the_default(ui: Any) -> None:
    ui.open_example("rejection_sampling")
    ui.page.locator("[data-testid=input-a]").fill("1e999")
    ui.page.locator("[data-testid=run-btn]").click()
    # Chromium marks 1e999 as bad input (value ''), which used to run silently with the default 3
    ui.page.wait_for_function("document.querySelector('[data-testid=run-status]').textContent.includes('bad_input')")
    assert "input 'a' must be a number" in ui.page.locator("[data-testid=run-status]").inner_text()
    assert ui.page.evaluate("window.MetagenUI.state().currentRun") in (None, "")


def test_uploading_a_binary_file_loads_nothing(ui: Any, tmp_path: Any) -> None:
    ui.open_example("chain_of_thought")
    before = ui.yaml()
    picture = tmp_path / "diagram.png"
    picture.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8)
    ui.page.once("dialog", lambda d: d.accept())  # discard the unsaved example
    ui.page.locator("[data-testid=upload-input]").set_input_files(str(picture))
    ui.page.wait_for_function("document.querySelector('[data-testid=notice]').textContent.includes('not a text file')")
    assert ui.notice().startswith("diagram.png is not a text file")
    assert ui.yaml() == before  # the pane was not filled with binary garbage
    assert ui.page.locator("[data-testid=yaml-error]").is_hidden()


def test_a_repeated_run_says_its_answer_came_from_the_cache(ui: Any) -> None:
    ui.open_example("chain_of_thought")
    ui.click_run()
    assert ui.wait_run_finished(60) == "succeeded"
    assert "from the cache" not in ui.page.locator("[data-testid=run-status]").inner_text()
    ui.click_run()
    assert ui.wait_run_finished(60) == "succeeded"
    assert "every node from the cache" in ui.page.locator("[data-testid=run-status]").inner_text()
    ui.page.locator("[data-testid=seed-input]").fill("5")
    ui.click_run()
    assert ui.wait_run_finished(60) == "succeeded"
    assert "from the cache" not in ui.page.locator("[data-testid=run-status]").inner_text()


def _accept_dialogs(ui: Any) -> list[str]:
    """Accept every dialog of the page (opening over unsaved work asks first, leaving it too); the confirm()
    messages, in order."""
    messages: list[str] = []

    def accept(dialog: Any) -> None:
        if dialog.type == "confirm":
            messages.append(dialog.message)
        dialog.accept()

    ui.page.on("dialog", accept)
    return messages


def _open_example_over(ui: Any, name: str, title_after: str) -> None:
    ui.pick_example(name)
    ui.page.wait_for_function("(t) => document.querySelector('[data-testid=wf-title]').textContent === t",
                              arg=title_after)


def test_a_second_example_runs_on_its_own_default_input(ui: Any, shot: Any) -> None:
    """Issue 37, 2.1: "New from example…" kept the first example's run input (the graph showed the second's)."""
    asked = _accept_dialogs(ui)
    ui.open_example("chain_of_thought")
    question = ui.page.locator("[data-testid=input-question]")
    assert question.input_value() == "What is 3 + 4?"
    _open_example_over(ui, "best_of_n", "best-of-n")
    assert question.input_value() == "What is the capital of France?"
    shot(ui.page, "second-example")
    run_id = ui.click_run()
    assert ui.wait_run_finished(60) == "succeeded"
    answer = ui.page.locator("[data-testid=run-outputs]").inner_text()
    assert "capital of France" in answer and "3 + 4" not in answer  # the dry run's model echoes its prompt
    from app.traces.store import TraceStore

    with TraceStore(ui.server.home / "traces.db", recover=False) as store:  # the server's runs stay as they are
        assert store.get_run(run_id)["run"]["inputs"] == {"question": "What is the capital of France?"}
    assert asked == []  # an example opened and left as it is holds no unsaved change (issue 41)


def test_a_typed_input_is_kept_while_editing_and_reset_by_opening(ui: Any) -> None:
    asked = _accept_dialogs(ui)
    ui.open_example("chain_of_thought")
    question = ui.page.locator("[data-testid=input-question]")
    question.fill("What is 5 + 6?")
    editor = ui.page.locator("[data-testid=yaml-editor]")
    editor.fill(editor.input_value().replace("default: What is 3 + 4?", "default: What is 1 + 1?"))
    ui.page.wait_for_function("document.querySelector('[data-testid=run-inputs]').dataset.sig.includes('1 + 1')")
    assert question.input_value() == "What is 5 + 6?"  # the user's text survives an edit of the same workflow
    _open_example_over(ui, "mbr", "minimum-bayes-risk")
    assert question.input_value() == "Why is the sky blue?"
    assert len(asked) == 1


def test_the_restored_draft_banner_follows_the_open_workflow(ui: Any, shot: Any) -> None:
    asked = _accept_dialogs(ui)
    ui.open_example("chain_of_thought")
    editor = ui.page.locator("[data-testid=yaml-editor]")
    editor.fill(editor.input_value().replace("default: What is 3 + 4?", "default: What is 3 + 5?"))
    ui.page.wait_for_function("document.querySelector('[data-testid=run-inputs]').dataset.sig.includes('3 + 5')")
    ui.reload()  # an edited example is unsaved: a draft is kept in the browser
    banner = ui.page.locator("[data-testid=draft-banner]")
    assert banner.is_visible()
    assert banner.inner_text().startswith("Restored your unsaved draft of 'chain-of-thought'")
    assert ui.page.locator("[data-testid=input-question]").input_value() == "What is 3 + 5?"
    _open_example_over(ui, "mbr", "minimum-bayes-risk")
    assert asked == ["Discard the unsaved changes to 'chain-of-thought'?"]
    assert banner.is_hidden()  # it spoke of the draft, which is no longer open
    shot(ui.page, "banner-gone")
