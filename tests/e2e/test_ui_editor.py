"""The editor page as a new user meets it: build by mouse, save and reopen, refused connections, YAML errors,
undo/redo (Chromium against `metagen ui --dry-run`)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.e2e

SERVER_ARGS = ["--dry-run"]

PROMPT = "{question}\nThink step by step, then write 'Answer: <number>'."


def build_self_consistency(ui: Any) -> None:
    """Input -> sampler -> voter -> output, placed from the palette and wired with the mouse."""
    question = ui.place("input", 0.10, 0.15)
    sampler = ui.place("sampler", 0.50, 0.12)
    voter = ui.place("voter", 0.10, 0.60)
    answer = ui.place("output", 0.55, 0.68)
    assert (question, sampler, voter, answer) == ("inputs.question", "sampler", "voter", "outputs.answer")
    ui.connect(question, "value", sampler, "question")
    ui.connect(sampler, "candidates", voter, "candidates")
    ui.connect(voter, "answer", answer, "value")
    ui.select(question)
    ui.set_param("default", "What is 17 + 25?")
    ui.select(sampler)
    ui.set_param("n", "5")
    ui.set_param("temperature", "0.8")
    ui.set_param("prompt", PROMPT)
    ui.select(voter)
    ui.set_param("method", "majority")


def test_build_self_consistency_with_the_mouse_save_reload_and_open(ui: Any, shot: Any, studio: Any) -> None:
    assert ui.workflow()["nodes"] == []
    build_self_consistency(ui)
    text = ui.wait_yaml(lambda t: "n: 5" in t and "voter.answer" in t and "17 + 25" in t and "step by step" in t)
    shot(ui.page, "built")
    wf = yaml.safe_load(text)
    nodes = {n["id"]: n for n in wf["nodes"]}
    assert nodes["sampler"]["inputs"] == {"question": "inputs.question"}
    assert nodes["sampler"]["params"]["n"] == 5
    assert nodes["sampler"]["params"]["temperature"] == 0.8
    assert nodes["sampler"]["params"]["prompt"] == PROMPT
    assert nodes["voter"]["inputs"] == {"candidates": "sampler.candidates"}
    assert wf["outputs"] == {"answer": "voter.answer"}
    assert wf["inputs"]["question"]["default"] == "What is 17 + 25?"
    ui.page.wait_for_function("document.querySelector('[data-testid=issue-count]').textContent === '0'")

    ui.save_as("my_self_consistency")
    assert ui.page.locator("[data-testid=dirty-flag]").is_hidden()
    saved = ui.yaml()
    on_disk = (studio.home / "workflows" / "my_self_consistency.yaml").read_text(encoding="utf-8")
    assert on_disk == saved

    ui.reload()
    assert ui.page.locator("[data-testid=draft-banner]").is_hidden()  # saved: no draft to restore
    ui.open_saved("my_self_consistency")
    assert ui.yaml() == saved
    assert sorted(ui.node_ids()) == ["inputs.question", "outputs.answer", "sampler", "voter"]
    assert ui.page.locator("[data-wire]").count() == 3
    shot(ui.page, "reopened")


def test_incompatible_ports_and_cycles_are_refused_with_a_message(ui: Any, shot: Any) -> None:
    question = ui.place("input", 0.10, 0.15)
    voter = ui.place("voter", 0.55, 0.15)
    ui.settle()
    before = ui.yaml()
    ui.connect(question, "value", voter, "candidates")  # text/json into a candidate set
    toast = ui.page.locator("[data-testid=editor-toast]")
    toast.wait_for(state="visible")
    assert "candidates" in toast.inner_text()
    shot(ui.page, "incompatible")
    ui.settle()
    assert ui.yaml() == before
    assert ui.page.locator("[data-wire]").count() == 0

    first = ui.place("template", 0.10, 0.62)
    second = ui.place("template", 0.55, 0.62)
    ui.connect(first, "text", second, "text")
    ui.wait_yaml(lambda t: f"{first}.text" in t)
    ui.connect(second, "text", first, "text")
    ui.page.wait_for_function("document.querySelector('[data-testid=editor-toast]').textContent"
                              ".toLowerCase().includes('cycle')")
    shot(ui.page, "cycle")
    ui.settle()
    wf = ui.workflow()
    templates = {n["id"]: n for n in wf["nodes"] if n["kind"] == "template"}
    assert templates[second].get("inputs") == {"text": f"{first}.text"}
    assert "inputs" not in templates[first]
    assert ui.page.locator("[data-wire]").count() == 1


VALID = """version: 1
name: typed
inputs:
  question: {type: text, default: 'What is 2 + 2?'}
nodes:
- id: answer_it
  kind: generator
  params: {prompt: '{question}', max_tokens: 32}
  inputs: {question: inputs.question}
outputs: {answer: answer_it.text}
"""


def test_yaml_syntax_error_shows_its_line_and_nothing_is_lost(ui: Any, shot: Any) -> None:
    editor = ui.page.locator("[data-testid=yaml-editor]")
    editor.fill(VALID)
    ui.page.wait_for_function("document.querySelectorAll('[data-node-id]').length === 3")
    assert sorted(ui.node_ids()) == ["answer_it", "inputs.question", "outputs.answer"]

    broken = VALID.replace("  params: {prompt: '{question}', max_tokens: 32}",
                           "  params: {prompt: '{question}', max_tokens: 32")
    editor.fill(broken)
    error = ui.page.locator("[data-testid=yaml-error]")
    error.wait_for(state="visible")
    assert "Line" in error.inner_text()
    line = int(error.locator(".mg-goto-line").get_attribute("data-line"))
    assert 7 <= line <= 9, error.inner_text()  # the unclosed mapping opened on line 7
    shot(ui.page, "syntax-error")
    assert ui.yaml() == broken  # the text stays as typed
    assert sorted(ui.node_ids()) == ["answer_it", "inputs.question", "outputs.answer"]  # canvas keeps last good
    ui.page.locator("[data-testid=save-btn]").click()
    assert "Fix the YAML error" in ui.notice()

    ui.reload()  # leaving the page keeps a draft: the broken text comes back, with its error
    ui.page.locator("[data-testid=draft-banner]").wait_for(state="visible")
    assert ui.yaml() == broken
    ui.page.locator("[data-testid=yaml-error]").wait_for(state="visible")
    shot(ui.page, "draft-restored")

    ui.page.locator("[data-testid=yaml-editor]").fill(VALID.replace("max_tokens: 32", "max_tokens: 48"))
    ui.page.locator("[data-testid=yaml-error]").wait_for(state="hidden")
    ui.page.wait_for_function("document.querySelectorAll('[data-node-id]').length === 3")
    ui.select("answer_it")
    assert ui.page.locator("[data-testid=editor-inspector] [data-param='max_tokens']").input_value() == "48"


def test_undo_redo_of_add_move_connect_delete(ui: Any, shot: Any) -> None:
    undo = ui.page.locator("[data-testid=editor-undo]")
    redo = ui.page.locator("[data-testid=editor-redo]")

    generator = ui.place("generator", 0.45, 0.2)  # add
    question = ui.place("input", 0.10, 0.2)
    ui.wait_yaml(lambda t: generator in t and "question" in t)
    undo.click()
    ui.wait_yaml(lambda t: "question" not in t)
    assert question not in ui.node_ids()
    redo.click()
    ui.wait_yaml(lambda t: "question" in t)
    assert question in ui.node_ids()

    def layout(node_id: str) -> list[float]:
        return ui.workflow()["layout"][node_id]

    ui.settle()
    start = layout(generator)
    ui.move_node(generator, 120, 140)  # move
    ui.wait_yaml(lambda t: layout(generator) != start)
    moved = layout(generator)
    ui.page.keyboard.press("Control+z")
    ui.wait_yaml(lambda t: layout(generator) == start)
    ui.page.keyboard.press("Control+Shift+z")
    ui.wait_yaml(lambda t: layout(generator) == moved)

    ui.connect(question, "value", generator, "question")  # connect
    ui.wait_yaml(lambda t: "question: inputs.question" in t)
    undo.click()
    ui.wait_yaml(lambda t: "question: inputs.question" not in t)
    assert ui.page.locator("[data-wire]").count() == 0
    redo.click()
    ui.wait_yaml(lambda t: "question: inputs.question" in t)
    assert ui.page.locator("[data-wire]").count() == 1
    shot(ui.page, "connected")

    ui.select(generator)  # delete
    ui.page.locator("[data-testid=editor-delete]").click()
    ui.wait_yaml(lambda t: "kind: generator" not in t)
    assert generator not in ui.node_ids()
    undo.click()
    ui.wait_yaml(lambda t: "kind: generator" in t and "question: inputs.question" in t)
    assert generator in ui.node_ids()
    assert ui.page.locator("[data-wire]").count() == 1
    redo.click()
    ui.wait_yaml(lambda t: "kind: generator" not in t)
    shot(ui.page, "deleted-again")


def test_upload_a_yaml_file_and_download_it_again(ui: Any, shot: Any, tmp_path: Any) -> None:
    source = tmp_path / "from_disk.yaml"
    source.write_text(VALID, encoding="utf-8")
    ui.page.locator("[data-testid=upload-input]").set_input_files(str(source))
    ui.page.wait_for_function("document.querySelectorAll('[data-node-id]').length === 3")
    assert ui.yaml() == VALID
    assert "from_disk.yaml" in ui.notice()
    assert ui.page.locator("[data-testid=dirty-flag]").is_visible()  # not in the workflows folder yet
    with ui.page.expect_download() as download:
        ui.page.locator("[data-testid=download-btn]").click()
    saved = tmp_path / "downloaded.yaml"
    download.value.save_as(str(saved))
    assert saved.read_text(encoding="utf-8") == VALID
    assert download.value.suggested_filename.endswith(".yaml")
    shot(ui.page, "uploaded")

    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nnodes: [\n", encoding="utf-8")
    ui.page.once("dialog", lambda dialog: dialog.accept())  # discard the unsaved upload
    ui.page.locator("[data-testid=upload-input]").set_input_files(str(bad))
    ui.page.locator("[data-testid=yaml-error]").wait_for(state="visible")
    assert ui.yaml() == "version: 1\nnodes: [\n"
    assert sorted(ui.node_ids()) == ["answer_it", "inputs.question", "outputs.answer"]  # canvas kept

    ui.page.once("dialog", lambda dialog: dialog.accept())  # New asks before dropping the unsaved text
    ui.page.locator("[data-testid=new-btn]").click()
    ui.wait_yaml(lambda t: "nodes: []" in t)
    ui.page.locator("[data-testid=yaml-error]").wait_for(state="hidden")
    assert ui.node_ids() == []
    assert ui.page.locator("[data-testid=dirty-flag]").is_hidden()
