"""Browser tests of the node-graph editor component (static/editor.js) driven with the real mouse in Chromium."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.workflow import spec as workflow_mod
from app.workflow.subworkflows import ChildLoader, workflow_ports
from app.workflow.validation import check
from nodes import registry

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "editor"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--no-first-run", "--disable-gpu",
]


@pytest.fixture(scope="module")
def editor_browser(chromium_browser: Any) -> Any:
    """The session's one Chromium (tests/conftest.py)."""
    return chromium_browser


class EditorPage:
    """A harness page plus helpers that act like a user with a mouse and keyboard."""

    def __init__(self, page: Any, name: str) -> None:
        self.page = page
        self.name = name
        self.errors: list[str] = []
        page.on("console", lambda msg: self.errors.append(f"console.{msg.type}: {msg.text}")
                if msg.type == "error" else None)
        page.on("pageerror", lambda exc: self.errors.append(f"pageerror: {exc}"))

    def open(self, base: str, query: str = "") -> EditorPage:
        self.page.goto(f"{base}/editor_harness.html{query}")
        self.page.wait_for_function("window.ed !== undefined")
        return self

    # ---- reading state
    def workflow(self) -> dict[str, Any]:
        return self.page.evaluate("ed.getWorkflow()")

    def node(self, node_id: str) -> dict[str, Any] | None:
        return next((n for n in self.workflow()["nodes"] if n["id"] == node_id), None)

    def node_ids(self) -> list[str]:
        return self.page.eval_on_selector_all("[data-node-id]", "els => els.map(e => e.dataset.nodeId)")

    def messages(self) -> list[dict[str, str]]:
        return self.page.evaluate("window.messages")

    def wait_change(self, count: int) -> dict[str, Any]:
        """Wait until onChange has fired `count` times in total; the last payload."""
        self.page.wait_for_function(f"window.changes.length >= {count}")
        return self.page.evaluate("window.changes[window.changes.length - 1]")

    # ---- geometry and mouse
    def center(self, selector: str) -> tuple[float, float]:
        box = self.page.locator(selector).first.bounding_box()
        assert box is not None, f"{selector} is not visible"
        return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2

    def drag(self, start: tuple[float, float], end: tuple[float, float], steps: int = 12) -> None:
        mouse = self.page.mouse
        mouse.move(*start)
        mouse.down()
        mouse.move(*end, steps=steps)
        mouse.up()

    def port(self, node_id: str, port: str) -> str:
        return f'[data-node-id="{node_id}"] [data-port="{port}"] .mge-dot'

    def connect(self, src: str, out: str, dst: str, inp: str) -> None:
        self.drag(self.center(self.port(src, f"out:{out}")), self.center(self.port(dst, f"in:{inp}")))

    def header(self, node_id: str) -> str:
        return f'[data-node-id="{node_id}"] .mge-node-title'

    def canvas_point(self, fx: float, fy: float) -> tuple[float, float]:
        box = self.page.locator('[data-testid="editor-canvas"]').bounding_box()
        return box["x"] + box["width"] * fx, box["y"] + box["height"] * fy

    def drop_from_palette(self, kind: str, fx: float, fy: float) -> None:
        self.drag(self.center(f'.mge-palette [data-kind="{kind}"]'), self.canvas_point(fx, fy))

    def screenshot(self, label: str) -> None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(ARTIFACTS / f"{self.name}-{label}.png"))


@pytest.fixture
def editor(editor_browser: Any, static_url: str, request: pytest.FixtureRequest) -> Iterator[EditorPage]:
    context = editor_browser.new_context(viewport={"width": 1400, "height": 860})
    page = context.new_page()
    ed = EditorPage(page, request.node.name)
    ed.base = static_url  # type: ignore[attr-defined]
    yield ed
    try:
        ed.screenshot("final")
    finally:
        context.close()
    assert ed.errors == [], f"browser console errors: {ed.errors}"


def _port_refs(wf: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {n["id"]: n.get("inputs", {}) for n in wf["nodes"]}


# ------------------------------------------------------------------ tests


def test_load_roundtrip_and_render(editor: EditorPage, static_url: str) -> None:
    editor.open(static_url)
    wf = editor.workflow()
    sample = editor.page.evaluate("window.SAMPLE_WORKFLOW")
    layout = wf.pop("layout")
    assert wf == sample
    assert set(layout) == {"inputs.question", "think", "vote", "outputs.answer"}
    assert layout["inputs.question"][0] < layout["think"][0] < layout["vote"][0] < layout["outputs.answer"][0]
    assert set(editor.node_ids()) == {"inputs.question", "think", "vote", "outputs.answer"}
    assert editor.page.locator('[data-wire="think.candidates->vote.candidates"]').count() == 1
    assert editor.page.locator('[data-wire="inputs.question.value->think.question"]').count() == 1
    # load() does not echo onChange
    editor.page.wait_for_timeout(300)
    assert editor.page.evaluate("window.changes.length") == 0
    editor.screenshot("loaded")


def test_build_from_empty_canvas_with_mouse(editor: EditorPage, static_url: str) -> None:
    editor.open(static_url, "?empty")
    assert editor.node_ids() == []
    editor.drop_from_palette("input", 0.05, 0.15)
    editor.drop_from_palette("sampler", 0.4, 0.15)
    editor.drop_from_palette("voter", 0.05, 0.55)
    editor.drop_from_palette("output", 0.5, 0.55)
    assert editor.node_ids() == ["inputs.question", "sampler", "voter", "outputs.answer"]

    # the sampler's prompt references {question}: a port appears for it
    editor.page.click(editor.header("sampler"))
    prompt = editor.page.locator('[data-param="prompt"]')
    prompt.fill("{question}\nThink step by step.")
    assert editor.page.locator('[data-vars-for="prompt"] [data-var="question"]').count() == 1
    editor.page.locator('[data-node-id="sampler"] [data-port="in:question"]').wait_for()

    editor.connect("inputs.question", "value", "sampler", "question")
    editor.connect("sampler", "candidates", "voter", "candidates")
    editor.connect("voter", "answer", "outputs.answer", "value")
    wf = editor.wait_change(4)
    wf = editor.workflow()
    assert wf["inputs"] == {"question": {"type": "text"}}
    assert _port_refs(wf) == {"sampler": {"question": "inputs.question"}, "voter": {"candidates": "sampler.candidates"}}
    assert wf["outputs"] == {"answer": "voter.answer"}
    assert wf["nodes"][0]["params"]["prompt"] == "{question}\nThink step by step."
    assert set(wf["layout"]) == {"inputs.question", "sampler", "voter", "outputs.answer"}
    editor.page.wait_for_timeout(250)
    assert editor.page.evaluate("window.changes[window.changes.length - 1]") == wf
    editor.screenshot("built")


def test_click_on_palette_item_adds_node_and_selects_it(editor: EditorPage, static_url: str) -> None:
    editor.open(static_url)
    editor.page.click('.mge-palette [data-kind="generator"]')
    assert "generator" in editor.node_ids()
    assert editor.page.evaluate("ed.getSelection()") == ["generator"]
    assert editor.page.evaluate("window.selections[window.selections.length - 1]") == "generator"
    assert editor.page.locator('[data-testid="inspector-id"]').input_value() == "generator"


def test_incompatible_connection_is_refused_with_message(editor: EditorPage, static_url: str) -> None:
    editor.open(static_url)
    editor.page.click('.mge-palette [data-kind="verifier"]')
    before = editor.workflow()
    editor.connect("vote", "answer", "verifier", "candidates")
    assert editor.workflow() == before
    assert any("cannot connect text to candidates" in m["text"] for m in editor.messages())
    toast = editor.page.locator('[data-testid="editor-toast"]')
    assert "cannot connect text to candidates" in toast.inner_text()
    editor.screenshot("refused")
    # number -> text is allowed (port_compatible), candidates -> json too
    editor.connect("vote", "confidence", "outputs.answer", "value")
    assert editor.workflow()["outputs"] == {"answer": "vote.confidence"}


def test_cycle_is_refused_with_message(editor: EditorPage, static_url: str) -> None:
    editor.open(static_url)
    editor.page.evaluate("""ed.load({version: 1, name: "chain", nodes: [
        {id: "s", kind: "sampler", params: {prompt: "hi"}},
        {id: "v1", kind: "verifier", inputs: {candidates: "s.candidates"}},
        {id: "v2", kind: "verifier", inputs: {candidates: "v1.candidates"}}], outputs: {}})""")
    before = editor.workflow()
    editor.connect("v2", "candidates", "v1", "candidates")
    assert editor.workflow() == before
    assert any("cycle" in m["text"] for m in editor.messages())
    editor.connect("v1", "candidates", "v1", "candidates")
    assert editor.workflow() == before


def test_broken_workflows_load_without_losing_anything(editor: EditorPage, static_url: str) -> None:
    """Unknown kinds, dangling references and unknown ports are drawn and kept; duplicate ids are split."""
    editor.open(static_url)
    broken = {"version": 1, "name": "broken", "inputs": {"q": "shorthand default"}, "nodes": [
        {"id": "a", "kind": "mystery", "params": {"x": 1}, "inputs": {"foo": "inputs.q"}},
        {"id": "b", "kind": "voter", "inputs": {"candidates": "ghost.candidates", "bogus": "a.out"}},
        {"id": "b", "kind": "sampler", "params": {"prompt": "{q}"}}],
        "outputs": {"answer": "nowhere.text"}}
    editor.page.evaluate("wf => ed.load(wf)", broken)
    wf = editor.workflow()
    assert [n["id"] for n in wf["nodes"]] == ["a", "b", "b_2"]
    assert wf["inputs"] == {"q": {"type": "text", "default": "shorthand default"}}
    assert _port_refs(wf) == {"a": {"foo": "inputs.q"}, "b": {"candidates": "ghost.candidates", "bogus": "a.out"},
                              "b_2": {}}
    assert wf["outputs"] == {"answer": "nowhere.text"}
    assert editor.page.locator('[data-node-id="a"].mge-unknown').count() == 1
    assert editor.page.locator('[data-node-id="b"] [data-port="in:bogus"].mge-stale').count() == 1
    assert editor.page.locator('[data-node-id="b"] [data-port="in:candidates"].mge-dangling').count() == 1
    assert any("used twice" in m["text"] for m in editor.messages())
    editor.screenshot("broken")


def test_connecting_again_replaces_the_wire(editor: EditorPage, static_url: str) -> None:
    editor.open(static_url)
    editor.page.click('.mge-palette [data-kind="refiner"]')
    editor.connect("refiner", "candidates", "vote", "candidates")
    assert _port_refs(editor.workflow())["vote"] == {"candidates": "refiner.candidates"}
    assert editor.page.locator('[data-wire^="think.candidates->"]').count() == 0


def test_pick_up_wire_from_input_and_drop_on_canvas_disconnects(editor: EditorPage, static_url: str) -> None:
    editor.open(static_url)
    editor.drag(editor.center(editor.port("vote", "in:candidates")), editor.canvas_point(0.5, 0.9))
    assert "inputs" not in editor.node("vote")
    editor.page.keyboard.press("Control+z")
    assert editor.node("vote")["inputs"] == {"candidates": "think.candidates"}


def test_delete_node_and_wire_with_keyboard(editor: EditorPage, static_url: str) -> None:
    editor.open(static_url)
    editor.page.click(editor.header("vote"))
    editor.page.keyboard.press("Delete")
    wf = editor.workflow()
    assert [n["id"] for n in wf["nodes"]] == ["think"]
    assert wf["outputs"] == {"answer": ""}
    assert editor.page.locator('[data-wire*="vote"]').count() == 0
    # select a wire by clicking it, delete it with Backspace
    a = editor.center(editor.port("inputs.question", "out:value"))
    b = editor.center(editor.port("think", "in:question"))
    editor.page.mouse.click((a[0] + b[0]) / 2, (a[1] + b[1]) / 2)
    editor.page.keyboard.press("Backspace")
    assert "inputs" not in editor.node("think")
    editor.page.keyboard.press("Control+z")
    editor.page.keyboard.press("Control+z")
    assert editor.workflow()["nodes"] == editor.page.evaluate("window.SAMPLE_WORKFLOW.nodes")


def test_keyboard_shortcuts_do_not_fire_while_typing(editor: EditorPage, static_url: str) -> None:
    editor.open(static_url)
    editor.page.click(editor.header("think"))
    field = editor.page.locator('[data-param="prompt"]')
    field.click()
    field.press("End")
    field.press("Backspace")
    field.press("Delete")
    field.type("/ x")
    assert "think" in editor.node_ids()
    assert editor.page.locator('[data-testid="quickadd"]').is_hidden()
    assert editor.node("think")["params"]["prompt"].endswith("<number>'/ x")


def test_multiselect_copy_paste_gives_fresh_ids(editor: EditorPage, static_url: str) -> None:
    editor.open(static_url)
    editor.page.click(editor.header("think"))
    editor.page.keyboard.down("Shift")
    editor.page.click(editor.header("vote"))
    editor.page.keyboard.up("Shift")
    assert sorted(editor.page.evaluate("ed.getSelection()")) == ["think", "vote"]
    editor.page.keyboard.press("Control+c")
    editor.page.mouse.move(*editor.canvas_point(0.4, 0.8))
    editor.page.keyboard.press("Control+v")
    wf = editor.workflow()
    assert [n["id"] for n in wf["nodes"]] == ["think", "vote", "think_2", "vote_2"]
    refs = _port_refs(wf)
    assert refs["vote_2"] == {"candidates": "think_2.candidates"}
    assert refs["think_2"] == {}  # wires from outside the copied set are not pasted
    assert sorted(editor.page.evaluate("ed.getSelection()")) == ["think_2", "vote_2"]
    assert wf["nodes"][2]["params"] == wf["nodes"][0]["params"]
    boxes = {i: editor.page.locator(f'[data-node-id="{i}"]').bounding_box() for i in editor.node_ids()}
    for a, b in itertools.combinations(boxes, 2):
        ra, rb = boxes[a], boxes[b]
        apart = (ra["x"] + ra["width"] <= rb["x"] or rb["x"] + rb["width"] <= ra["x"]
                 or ra["y"] + ra["height"] <= rb["y"] or rb["y"] + rb["height"] <= ra["y"])
        assert apart, f"pasted nodes overlap: {a} and {b}"
    editor.screenshot("pasted")
    editor.page.keyboard.press("Control+z")
    assert [n["id"] for n in editor.workflow()["nodes"]] == ["think", "vote"]
    # Ctrl+X cuts; pasting twice gives fresh ids each time; a pasted workflow input gets a fresh name
    editor.page.click(editor.header("inputs.question"))
    editor.page.keyboard.press("Control+x")
    assert "question" not in editor.workflow().get("inputs", {})
    editor.page.keyboard.press("Control+v")
    editor.page.keyboard.press("Control+v")
    assert list(editor.workflow()["inputs"]) == ["question", "question_2"]


def test_copy_goes_to_the_system_clipboard_for_other_tabs(editor: EditorPage, static_url: str) -> None:
    editor.open(static_url)
    editor.page.click(editor.header("vote"))
    copied = editor.page.evaluate("""() => {
        const dt = new DataTransfer();
        document.querySelector('.mge').dispatchEvent(new ClipboardEvent('copy', {clipboardData: dt, bubbles: true}));
        return dt.getData('text/plain');
    }""")
    assert '"metagen_editor_clipboard":1' in copied
    other = EditorPage(editor.page.context.new_page(), editor.name + "-other").open(static_url, "?empty")
    other.page.evaluate("""(text) => {
        const dt = new DataTransfer();
        dt.setData('text/plain', text);
        document.querySelector('.mge').dispatchEvent(new ClipboardEvent('paste', {clipboardData: dt, bubbles: true}));
    }""", copied)
    assert other.node_ids() == ["vote"]
    assert other.node("vote")["params"] == editor.node("vote")["params"]
    assert other.errors == []


def test_context_menus_and_double_click_rename(editor: EditorPage, static_url: str) -> None:
    editor.open(static_url)
    editor.page.click(editor.header("vote"), button="right")
    menu = editor.page.locator('[data-testid="context-menu"]')
    menu.locator('[data-action="duplicate"]').click()
    assert "vote_2" in editor.node_ids() and menu.count() == 0
    editor.page.click(editor.header("think"), button="right")
    menu.locator('[data-action="disconnect"]').click()
    refs = _port_refs(editor.workflow())
    assert "question" not in refs["think"] and refs["vote"] == {}
    # right-click on the canvas: add a node at that point
    point = editor.canvas_point(0.5, 0.9)
    editor.page.mouse.click(*point, button="right")
    menu.locator('[data-action="add"]').click()
    editor.page.locator('[data-testid="quickadd-input"]').type("refiner")
    editor.page.keyboard.press("Enter")
    assert "refiner" in editor.node_ids()
    # Escape closes a menu without acting
    editor.page.mouse.click(*editor.canvas_point(0.1, 0.9), button="right")
    assert menu.count() == 1
    editor.page.keyboard.press("Escape")
    assert menu.count() == 0
    # double-click a node: its id field is focused and selected for renaming
    editor.page.dblclick(editor.header("vote_2"))
    editor.page.keyboard.type("tally")
    editor.page.keyboard.press("Enter")
    assert "tally" in editor.node_ids() and "vote_2" not in editor.node_ids()


def test_alt_drag_duplicates_and_shift_f_fits_the_selection(editor: EditorPage, static_url: str) -> None:
    editor.open(static_url)
    before = editor.workflow()["layout"]["vote"]
    x, y = editor.center(editor.header("vote"))
    editor.page.keyboard.down("Alt")
    editor.drag((x, y), (x, y + 180))
    editor.page.keyboard.up("Alt")
    wf = editor.workflow()
    assert wf["layout"]["vote"] == before
    assert wf["layout"]["vote_2"][0] == before[0] and wf["layout"]["vote_2"][1] > before[1] + 100
    assert editor.page.evaluate("ed.getSelection()") == ["vote_2"]
    editor.page.keyboard.press("Shift+F")
    canvas = editor.page.locator('[data-testid="editor-canvas"]').bounding_box()
    box = editor.page.locator('[data-node-id="vote_2"]').bounding_box()
    assert box["width"] > 240, "fitting one node zooms in"
    assert abs(box["x"] + box["width"] / 2 - (canvas["x"] + canvas["width"] / 2)) < 5


def test_rubber_band_selection_then_delete(editor: EditorPage, static_url: str) -> None:
    editor.open(static_url)
    think = editor.page.locator('[data-node-id="think"]').bounding_box()
    vote = editor.page.locator('[data-node-id="vote"]').bounding_box()
    start = (think["x"] - 12, min(think["y"], vote["y"]) - 12)
    end = (vote["x"] + vote["width"] + 12, max(think["y"] + think["height"], vote["y"] + vote["height"]) + 12)
    editor.page.keyboard.down("Shift")
    editor.drag(start, end)
    editor.page.keyboard.up("Shift")
    assert sorted(editor.page.evaluate("ed.getSelection()")) == ["think", "vote"]
    editor.page.click('[data-testid="editor-delete"]')
    assert editor.node_ids() == ["inputs.question", "outputs.answer"]


def test_undo_redo_add_move_connect_delete(editor: EditorPage, static_url: str) -> None:
    editor.open(static_url, "?empty")
    states = [editor.workflow()]
    editor.drop_from_palette("sampler", 0.3, 0.3)                       # add
    states.append(editor.workflow())
    editor.drop_from_palette("voter", 0.6, 0.5)                         # add
    states.append(editor.workflow())
    x, y = editor.center(editor.header("voter"))
    editor.drag((x, y), (x + 80, y - 60))                               # move
    states.append(editor.workflow())
    assert states[3]["layout"]["voter"] != states[2]["layout"]["voter"]
    editor.connect("sampler", "candidates", "voter", "candidates")      # connect
    states.append(editor.workflow())
    editor.page.click(editor.header("sampler"))
    editor.page.keyboard.press("Delete")                                # delete
    states.append(editor.workflow())
    assert [n["id"] for n in states[-1]["nodes"]] == ["voter"]
    assert "inputs" not in states[-1]["nodes"][0]

    for expected in reversed(states[:-1]):
        editor.page.keyboard.press("Control+z")
        assert editor.workflow() == expected
    assert editor.page.locator('[data-testid="editor-undo"]').is_disabled()
    for expected in states[1:]:
        editor.page.keyboard.press("Control+Shift+z")
        assert editor.workflow() == expected
    editor.page.click('[data-testid="editor-undo"]')
    assert editor.workflow() == states[-2]
    editor.page.keyboard.press("Control+y")
    assert editor.workflow() == states[-1]
    editor.page.click('[data-testid="editor-undo"]')
    editor.page.click('[data-testid="editor-redo"]')
    assert editor.workflow() == states[-1]


def test_inspector_edits_change_workflow_and_validate_as_you_type(editor: EditorPage, static_url: str) -> None:
    editor.open(static_url)
    editor.page.click(editor.header("think"))
    n = editor.page.locator('[data-param="n"]')
    n.fill("5")
    assert editor.node("think")["params"]["n"] == 5
    n.fill("999")
    assert "\u2264 256" in editor.page.locator('[data-error-for="n"]').inner_text()
    assert editor.node("think")["params"]["n"] == 5
    n.fill("2.5")
    assert "whole number" in editor.page.locator('[data-error-for="n"]').inner_text()
    n.fill("8")  # the default: the param is dropped from params
    assert "n" not in editor.node("think")["params"]
    assert editor.page.locator('[data-error-for="n"]').inner_text() == ""
    editor.page.locator('[data-param="chat"]').uncheck()
    assert editor.node("think")["params"]["chat"] is False
    editor.page.select_option('[data-testid="inspector-model"]', "")
    assert "model" not in editor.node("think")

    editor.page.click(editor.header("vote"))
    editor.page.select_option('[data-param="method"]', "weighted")
    assert editor.node("vote")["params"]["method"] == "weighted"
    extract = editor.page.locator('[data-param="extract"]')
    extract.fill('{"regex": ')
    assert "invalid JSON" in editor.page.locator('[data-error-for="extract"]').inner_text()
    extract.fill('{"regex": "(\\\\d+)"}')
    assert editor.node("vote")["params"]["extract"] == {"regex": "(\\d+)"}

    # one undo step per edited field (typing is coalesced)
    editor.page.click(editor.header("think"))
    prompt = editor.page.locator('[data-param="prompt"]')
    prompt.fill("")
    prompt.type("{topic} and {question}")
    ports = editor.page.eval_on_selector_all('[data-node-id="think"] [data-port^="in:"]',
                                             "els => els.map(e => e.dataset.port)")
    assert ports == ["in:topic", "in:question", "in:+"]
    states = editor.page.eval_on_selector_all('[data-vars-for="prompt"] [data-var]',
                                              "els => els.map(e => [e.dataset.var, e.dataset.varState])")
    assert states == [["topic", "unwired"], ["question", "wired"]]
    editor.connect("inputs.question", "value", "think", "topic")
    assert editor.page.locator('[data-vars-for="prompt"] [data-var="topic"]').get_attribute("data-var-state") == "wired"
    editor.page.locator('[data-testid="editor-canvas"]').click(position={"x": 5, "y": 5})
    editor.page.keyboard.press("Control+z")  # the connection
    assert "topic" not in editor.node("think")["inputs"]
    editor.page.keyboard.press("Control+z")  # all the typing in the prompt at once
    assert editor.node("think")["params"]["prompt"].startswith("{question}\nThink step by step")
    editor.screenshot("inspector")


def test_variadic_node_takes_extra_inputs_on_its_plus_port(editor: EditorPage, static_url: str) -> None:
    editor.open(static_url)
    editor.page.click('.mge-palette [data-kind="template"]')
    editor.connect("inputs.question", "value", "template", "+")
    editor.connect("vote", "answer", "template", "+")
    editor.connect("vote", "confidence", "template", "+")
    assert _port_refs(editor.workflow())["template"] == {
        "question": "inputs.question", "answer": "vote.answer", "confidence": "vote.confidence"}
    ports = editor.page.eval_on_selector_all('[data-node-id="template"] [data-port^="in:"]',
                                             "els => els.map(e => e.dataset.port)")
    assert ports == ["in:x", "in:question", "in:answer", "in:confidence", "in:+"]
    # a {variable} that the node fills itself (verifier's {candidate}) is not an input port
    editor.page.click('.mge-palette [data-kind="verifier"]')
    editor.page.select_option('[data-param="method"]', "llm_judge")
    assert editor.page.locator('[data-node-id="verifier"] [data-port="in:candidate"]').count() == 0


def test_list_param_is_one_item_per_line(editor: EditorPage, static_url: str) -> None:
    editor.open(static_url)
    editor.page.click('.mge-palette [data-kind="generator"]')
    stop = editor.page.locator('[data-param="stop"]')
    stop.fill("Answer:\n\n###\n")
    assert editor.node("generator")["params"]["stop"] == ["Answer:", "###"]
    stop.fill("")
    assert "stop" not in editor.node("generator").get("params", {})


def test_show_if_hides_irrelevant_params(editor: EditorPage, static_url: str) -> None:
    editor.open(static_url)
    editor.page.click('.mge-palette [data-kind="verifier"]')
    assert editor.page.locator('[data-field="pattern"]').is_visible()
    assert editor.page.locator('[data-field="judge_prompt"]').is_hidden()
    editor.page.select_option('[data-param="method"]', "llm_judge")
    assert editor.page.locator('[data-field="pattern"]').is_hidden()
    assert editor.page.locator('[data-field="judge_prompt"]').is_visible()


def test_rename_node_id_updates_wires(editor: EditorPage, static_url: str) -> None:
    editor.open(static_url)
    editor.page.click(editor.header("think"))
    field = editor.page.locator('[data-testid="inspector-id"]')
    field.fill("vote")
    assert "another node" in editor.page.locator('[data-error-for="id"]').inner_text()
    field.fill("cot")
    field.press("Enter")
    wf = editor.workflow()
    assert [n["id"] for n in wf["nodes"]] == ["cot", "vote"]
    assert _port_refs(wf)["vote"] == {"candidates": "cot.candidates"}
    assert "cot" in wf["layout"] and "think" not in wf["layout"]
    # renaming a workflow input rewires its consumers
    editor.page.click(editor.header("inputs.question"))
    name = editor.page.locator('[data-testid="inspector-id"]')
    name.fill("problem")
    name.press("Enter")
    wf = editor.workflow()
    assert list(wf["inputs"]) == ["problem"]
    assert _port_refs(wf)["cot"] == {"question": "inputs.problem"}


def test_quick_add_search(editor: EditorPage, static_url: str) -> None:
    editor.open(static_url)
    point = editor.canvas_point(0.5, 0.85)
    editor.page.mouse.dblclick(*point)
    search = editor.page.locator('[data-testid="quickadd-input"]')
    search.wait_for()
    search.type("refin")
    items = editor.page.eval_on_selector_all(".mge-quick-item", "els => els.map(e => e.dataset.kind)")
    assert items == ["refiner"]
    search.press("Enter")
    assert editor.page.locator('[data-testid="quickadd"]').is_hidden()
    assert "refiner" in editor.node_ids()
    box = editor.page.locator('[data-node-id="refiner"]').bounding_box()
    assert abs(box["x"] - point[0]) < 5 and abs(box["y"] - point[1]) < 5
    # "/" opens it too; Escape closes
    editor.page.keyboard.press("/")
    search.wait_for()
    editor.page.keyboard.press("Escape")
    assert editor.page.locator('[data-testid="quickadd"]').is_hidden()
    # Space (without dragging) opens it; arrows + Enter pick
    editor.page.mouse.move(*editor.canvas_point(0.3, 0.8))
    editor.page.keyboard.press("Space")
    search.wait_for()
    search.type("gen")
    search.press("Enter")
    assert "generator" in editor.node_ids()


def test_dropping_a_wire_on_the_canvas_offers_compatible_kinds(editor: EditorPage, static_url: str) -> None:
    editor.open(static_url)
    before = editor.workflow()
    editor.drag(editor.center(editor.port("think", "out:candidates")), editor.canvas_point(0.5, 0.88))
    search = editor.page.locator('[data-testid="quickadd-input"]')
    search.wait_for()
    assert "think.candidates" in editor.page.locator('[data-testid="quickadd"]').inner_text()
    kinds = editor.page.eval_on_selector_all(".mge-quick-item", "els => els.map(e => e.dataset.kind)")
    assert {"verifier", "voter", "output"} <= set(kinds)
    assert "input" not in kinds and "refiner" not in kinds  # refiner takes text only
    search.type("verif")
    search.press("Enter")
    wf = editor.workflow()
    assert _port_refs(wf)["verifier"] == {"candidates": "think.candidates"}
    # dragging backwards from an empty input: kinds with a matching output; a workflow input gets its type
    editor.drag(editor.center(editor.port("verifier", "in:question")), editor.canvas_point(0.2, 0.88))
    search.wait_for()
    kinds = editor.page.eval_on_selector_all(".mge-quick-item", "els => els.map(e => e.dataset.kind)")
    assert "input" in kinds and "verifier" not in kinds
    search.type("input")
    search.press("Enter")
    wf = editor.workflow()
    assert _port_refs(wf)["verifier"] == {"candidates": "think.candidates", "question": "inputs.input"}
    assert wf["inputs"]["input"] == {"type": "text"}
    editor.page.keyboard.press("Control+z")
    editor.page.keyboard.press("Control+z")
    assert editor.workflow() == before
    editor.screenshot("wire-dropped")


def test_host_page_styles_do_not_leak_in(editor: EditorPage, static_url: str) -> None:
    editor.open(static_url, "?hostile")
    editor.page.evaluate("""
        ed.setIssues([{node_id: "vote", code: "x", message: "bad", hint: "fix", severity: "error"}]);
        ed.setRunState({think: {state: "running"}})""")
    editor.connect("vote", "answer", "think", "question")  # a cycle: refused, toasted

    def color(selector: str) -> str:
        return editor.page.locator(selector).first.evaluate("e => getComputedStyle(e).color")

    assert color(".mge-toast-item") == "rgb(249, 250, 251)"
    assert color('[data-testid="state-badge"]') == "rgb(255, 255, 255)"
    assert color(".mge-issue-badge") == "rgb(255, 255, 255)"
    editor.page.hover(".mge-issue-badge")
    assert color('[data-testid="issue-tip"]') == "rgb(249, 250, 251)"
    assert color(".mge-node-title") == "rgb(31, 41, 55)"
    assert color(".mge-palette-item .mge-item-title") == "rgb(31, 41, 55)"
    assert editor.page.locator(".mge-btn").first.evaluate("e => getComputedStyle(e).marginBottom") == "0px"
    editor.page.click(editor.header("vote"))
    method = editor.page.locator('[data-param="method"]')
    style = method.evaluate("e => { const c = getComputedStyle(e); "
                            "return [c.appearance, c.borderRadius, c.fontSize]; }")
    assert style[0] != "none" and style[1] == "6px" and style[2] == "12.5px"


def test_palette_search_filters(editor: EditorPage, static_url: str) -> None:
    editor.open(static_url)
    editor.page.fill('[data-testid="palette-search"]', "vote")
    editor.page.focus('[data-testid="palette-search"]')
    kinds = editor.page.eval_on_selector_all(".mge-palette [data-kind]", "els => els.map(e => e.dataset.kind)")
    assert kinds == ["voter"]
    assert "Majority" in editor.page.get_attribute('.mge-palette [data-kind="voter"]', "title")
    editor.page.keyboard.press("Enter")  # adds the first match
    assert "voter" in editor.node_ids()


def test_auto_layout_and_fit(editor: EditorPage, static_url: str) -> None:
    editor.open(static_url)
    wf = editor.page.evaluate("window.SAMPLE_WORKFLOW")
    wf["nodes"].append({"id": "judge", "kind": "verifier", "inputs": {"candidates": "think.candidates"}})
    wf["nodes"][1]["inputs"] = {"candidates": "judge.candidates"}
    editor.page.evaluate("wf => ed.load(wf)", wf)
    layout = editor.workflow()["layout"]
    order = ["inputs.question", "think", "judge", "vote", "outputs.answer"]
    xs = [layout[i][0] for i in order]
    assert xs == sorted(xs) and len(set(xs)) == len(xs)

    # scramble positions by dragging, then auto-layout restores a left-to-right order
    x, y = editor.center(editor.header("vote"))
    editor.drag((x, y), editor.canvas_point(0.05, 0.05))
    editor.page.click('[data-testid="editor-layout"]')
    layout = editor.workflow()["layout"]
    assert [layout[i][0] for i in order] == sorted(layout[i][0] for i in order)
    boxes = [editor.page.locator(f'[data-node-id="{i}"]').bounding_box() for i in order]
    for a, b in itertools.pairwise(boxes):
        assert a["x"] + a["width"] <= b["x"], "nodes overlap after auto-layout"
    editor.page.keyboard.press("Control+z")
    assert editor.workflow()["layout"]["vote"] != layout["vote"]

    # zoom far in, then fit: every node is inside the canvas
    for _ in range(8):
        editor.page.mouse.move(*editor.canvas_point(0.5, 0.5))
        editor.page.mouse.wheel(0, -300)
    editor.page.click('[data-testid="editor-fit"]')
    canvas = editor.page.locator('[data-testid="editor-canvas"]').bounding_box()
    for i in order:
        box = editor.page.locator(f'[data-node-id="{i}"]').bounding_box()
        assert canvas["x"] <= box["x"] and box["x"] + box["width"] <= canvas["x"] + canvas["width"]
        assert canvas["y"] <= box["y"] and box["y"] + box["height"] <= canvas["y"] + canvas["height"]
    editor.screenshot("layout")


def test_pan_and_zoom_around_cursor(editor: EditorPage, static_url: str) -> None:
    editor.open(static_url)
    before = editor.page.locator('[data-node-id="think"]').bounding_box()
    editor.drag(editor.canvas_point(0.5, 0.92), editor.canvas_point(0.6, 0.82))
    after = editor.page.locator('[data-node-id="think"]').bounding_box()
    canvas = editor.page.locator('[data-testid="editor-canvas"]').bounding_box()
    assert abs(after["x"] - before["x"] - canvas["width"] * 0.1) < 2
    assert editor.page.evaluate("ed.getSelection()") == []
    # zoom in at the node's top-left corner: that point stays put, the node grows
    editor.page.mouse.move(after["x"], after["y"])
    editor.page.mouse.wheel(0, -200)
    editor.page.wait_for_timeout(50)
    zoomed = editor.page.locator('[data-node-id="think"]').bounding_box()
    assert zoomed["width"] > after["width"] * 1.2
    assert abs(zoomed["x"] - after["x"]) < 2 and abs(zoomed["y"] - after["y"]) < 2
    # the minimap: clicking its left edge brings the left of the workflow to the middle of the view
    minimap = editor.page.locator('[data-testid="editor-minimap"]')
    box = minimap.bounding_box()
    before_map = editor.page.locator('[data-node-id="inputs.question"]').bounding_box()
    editor.page.mouse.click(box["x"] + 8, box["y"] + box["height"] / 2)
    after_map = editor.page.locator('[data-node-id="inputs.question"]').bounding_box()
    assert after_map["x"] > before_map["x"] + 50
    editor.page.click('[data-testid="editor-toggle-minimap"]')
    assert minimap.is_hidden()
    editor.page.wait_for_timeout(250)
    assert editor.page.evaluate("window.changes.length") == 0, "panning and zooming are not edits"


def test_dragging_to_the_canvas_edge_pans_the_view(editor: EditorPage, static_url: str) -> None:
    editor.open(static_url)
    canvas = editor.page.locator('[data-testid="editor-canvas"]').bounding_box()
    x, y = editor.center(editor.header("vote"))
    start = editor.workflow()["layout"]["vote"][0]
    zoom = editor.page.evaluate("ed.view.z")
    mouse = editor.page.mouse
    mouse.move(x, y)
    mouse.down()
    edge_x = canvas["x"] + canvas["width"] - 6
    mouse.move(edge_x, y, steps=8)
    editor.page.wait_for_timeout(400)
    mouse.up()
    without_autopan = start + (edge_x - x) / zoom
    assert editor.workflow()["layout"]["vote"][0] > without_autopan + 60
    box = editor.page.locator('[data-node-id="vote"]').bounding_box()
    assert box["x"] < edge_x < box["x"] + box["width"] + 2, "the node stays under the pointer"


def test_run_state_and_issues_are_painted(editor: EditorPage, static_url: str) -> None:
    editor.open(static_url)
    editor.page.evaluate("""ed.setRunState({
        "inputs.question": {state: "done"},
        think: {state: "running", progress: 0.4, tokens: 123, text: "Let me think. 17 + 25 = 42"},
        vote: {state: "queued"}})""")
    think = editor.page.locator('[data-node-id="think"]')
    assert think.get_attribute("data-state") == "running"
    assert "mge-state-running" in think.get_attribute("class")
    assert think.locator('[data-testid="state-badge"]').inner_text().lower() == "running"
    assert "123 tok" in think.locator('[data-testid="run-meta"]').inner_text()
    assert "17 + 25 = 42" in think.locator('[data-testid="node-preview"]').inner_text()
    width = think.locator(".mge-bar").evaluate("e => e.style.width")
    assert width in ("40%", "40.0%")
    assert editor.page.locator('[data-node-id="vote"]').get_attribute("data-state") == "queued"
    editor.screenshot("running")

    editor.page.evaluate("""ed.setRunState({think: {state: "done", progress: 1},
        vote: {state: "error", message: "no answer could be extracted"}})""")
    assert think.get_attribute("data-state") == "done"
    vote = editor.page.locator('[data-node-id="vote"]')
    assert "no answer could be extracted" in vote.locator('[data-testid="node-error"]').inner_text()

    editor.page.evaluate("""ed.setIssues([
        {node_id: "vote", code: "bad_param", message: "param 'method' must be one of majority, weighted",
         hint: "choose majority", line: 12, severity: "error"},
        {node_id: "think", code: "unused", message: "looks odd", hint: "", line: 3, severity: "warning"},
        {node_id: null, code: "no_outputs", message: "the workflow declares no outputs",
         hint: "add outputs", line: null, severity: "error"}])""")
    assert "mge-has-error" in vote.get_attribute("class")
    assert "mge-has-warning" in think.get_attribute("class")
    badge = vote.locator('[data-testid="issue-badge"]')
    badge.hover()
    pop = editor.page.locator('[data-testid="issue-tip"]')
    assert pop.is_visible()
    assert "must be one of" in pop.inner_text() and "choose majority" in pop.inner_text()
    global_issues = editor.page.locator('[data-testid="editor-global-issues"]')
    assert "the workflow declares no outputs" in global_issues.inner_text()
    # issues naming a port or a param are shown on that port and under that inspector field
    editor.page.evaluate("""ed.setIssues([
        {node_id: "think", code: "missing_input", message: "input 'question' is not connected", hint: "wire it",
         severity: "error"},
        {node_id: "think", code: "bad_param", message: "param 'n' must be <= 256, got 999", hint: "fewer samples",
         severity: "error"}])""")
    assert think.locator('[data-port="in:question"].mge-port-bad').count() == 1
    editor.page.click(editor.header("think"))
    assert "must be <= 256" in editor.page.locator('[data-error-for="n"]').inner_text()
    editor.screenshot("issues")

    editor.page.evaluate("ed.clearRunState(); ed.setIssues([])")
    assert think.get_attribute("data-state") is None
    assert "mge-has-error" not in vote.get_attribute("class")
    assert editor.page.locator('[data-testid="editor-global-issues"]').is_hidden()


def test_workflow_input_inspector_and_builtin_io_fallback(editor: EditorPage, static_url: str) -> None:
    editor.open(static_url, "?builtin-io")
    editor.page.click(editor.header("inputs.question"))
    editor.page.select_option('[data-param="type"]', "number")
    # a number may feed a text port: the wire into the sampler's {question} stays; a text default is dropped
    assert _port_refs(editor.workflow())["think"] == {"question": "inputs.question"}
    assert editor.workflow()["inputs"] == {"question": {"type": "number"}}
    editor.page.fill('[data-param="default"]', "42")
    assert editor.workflow()["inputs"] == {"question": {"type": "number", "default": 42}}
    # a template {variable} port accepts any type, so the wire stays when the input becomes json
    editor.page.select_option('[data-param="type"]', "json")
    assert _port_refs(editor.workflow())["think"] == {"question": "inputs.question"}
    editor.page.fill('[data-param="default"]', '{"a": [1, 2')
    assert "invalid JSON" in editor.page.locator('[data-error-for="default"]').inner_text()
    editor.page.fill('[data-param="default"]', '{"a": [1, 2]}')
    assert editor.workflow()["inputs"] == {"question": {"type": "json", "default": {"a": [1, 2]}}}
    # a workflow output pseudo-node is added from the builtin fallback and wired from a number
    editor.page.click('.mge-palette [data-kind="output"]')
    editor.connect("vote", "confidence", "outputs.output", "value")
    assert editor.workflow()["outputs"] == {"answer": "vote.answer", "output": "vote.confidence"}


def _example_workflows() -> list[Path]:
    return sorted((REPO / "workflows").glob("*.yaml"))


def test_real_registry_and_every_example_workflow_round_trip(editor: EditorPage, static_url: str) -> None:
    """The editor draws each example with the real node schema: no unknown kinds, no orphan ports, and
    getWorkflow() gives back exactly what was loaded (layout included)."""
    examples = _example_workflows()
    assert examples, "workflows/ has no examples"
    editor.open(static_url, "?empty")
    schema = registry.default_registry().schema()
    editor.page.evaluate("([schema, rules]) => { ed.setRules(rules); ed.setSchema(schema); }",
                         [schema, registry.graph_rules()])
    palette = editor.page.eval_on_selector_all(".mge-palette [data-kind]", "els => els.map(e => e.dataset.kind)")
    assert sorted(palette) == sorted(entry["kind"] for entry in schema)
    ports = {p.stem: workflow_ports(wf, check(wf, registry.default_registry(), ChildLoader((p.parent,))))
             for p in examples for wf in [workflow_mod.load_workflow(p)]}
    editor.page.evaluate("ports => ed.setWorkflows(ports)", ports)  # the ports of the examples' workflow nodes
    for path in examples:
        data = workflow_mod.load_workflow(path).to_dict()
        editor.page.evaluate("wf => ed.load(wf, {fit: true})", data)
        assert editor.workflow() == data, f"{path.name} does not round-trip through the editor"
        wires = sum(len(n.get("inputs", {})) for n in data["nodes"]) + len(data["outputs"])
        assert editor.page.locator("[data-wire]").count() == wires, path.name
        assert editor.page.locator(".mge-unknown, .mge-stale, .mge-dangling").count() == 0, path.name
        editor.screenshot(path.stem)


def test_two_hundred_nodes_render_and_drag(editor: EditorPage, static_url: str) -> None:
    editor.open(static_url)
    editor.page.evaluate("""() => {
        const nodes = [];
        for (let i = 0; i < 200; i++) {
            const n = {id: `s${i}`, kind: i % 2 ? "verifier" : "sampler", params: {prompt: "x"}};
            if (i % 2) n.inputs = {candidates: `s${i - 1}.candidates`};
            nodes.push(n);
        }
        ed.load({version: 1, name: "big", nodes, outputs: {}});
    }""")
    assert editor.page.locator("[data-node-id]").count() == 200
    assert editor.page.locator("[data-wire]").count() == 100
    assert len(editor.workflow()["layout"]) == 200
    editor.page.click('[data-testid="editor-zoom-in"]')
    editor.page.click('[data-testid="editor-zoom-in"]')
    node_id = editor.page.evaluate("""() => {
        const c = document.querySelector('[data-testid="editor-canvas"]').getBoundingClientRect();
        for (const el of document.querySelectorAll('[data-node-id]')) {
            const r = el.getBoundingClientRect();
            if (r.left > c.left + 20 && r.right < c.right - 20 && r.top > c.top + 20 && r.bottom < c.bottom - 20) {
                return el.dataset.nodeId;
            }
        }
        return null;
    }""")
    assert node_id is not None
    start = editor.workflow()["layout"][node_id]
    x, y = editor.center(f'[data-node-id="{node_id}"] .mge-node-title')
    editor.drag((x, y), (x + 60, y + 40), steps=20)
    end = editor.workflow()["layout"][node_id]
    assert end != start
