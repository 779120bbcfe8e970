"""Editor responsiveness in headless Chromium: load, full re-render, drag and undo at 50 vs 200 nodes."""

from __future__ import annotations

import functools
import http.server
import statistics
import threading
from pathlib import Path
from typing import Any

from playwright.sync_api import sync_playwright

STATIC = Path(__file__).resolve().parents[1] / "static"
SIZES = (50, 200)

BUILD = """(count) => {
    const nodes = [];
    for (let i = 0; i < count; i++) {
        const n = {id: `n${i}`, kind: i % 3 === 2 ? "voter" : (i % 3 ? "verifier" : "sampler"),
                   params: i % 3 ? {} : {prompt: "{question} step " + i}};
        if (i % 3 === 0) n.inputs = {question: "inputs.question"};
        else n.inputs = {candidates: `n${i - 1}.candidates`};
        nodes.push(n);
    }
    return {version: 1, name: "big", inputs: {question: {type: "text"}}, nodes, outputs: {answer: "n2.answer"}};
}"""

MEASURE = """async (count) => {
    const wf = (BUILD)(count);
    const frame = () => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
    let t = performance.now();
    ed.load(wf, {fit: true});
    document.body.offsetHeight;
    const load = performance.now() - t;
    await frame();
    // one param edit = snapshot + re-render of every node signature + wires
    ed.select("n0");
    t = performance.now();
    for (let i = 0; i < 20; i++) ed.setParam("n0", "n", 2 + i);
    document.body.offsetHeight;
    const edit = (performance.now() - t) / 20;
    // drag every node at once: the per-move cost of the handler plus style recalculation and layout
    ed.select(wf.nodes.map((n) => n.id));
    const vp = document.querySelector('[data-testid="editor-canvas"]');
    const el = document.querySelector('[data-node-id="n0"] .mge-node-title');
    const r = el.getBoundingClientRect();
    const opts = (x, y) => ({clientX: x, clientY: y, pointerId: 7, bubbles: true, button: 0, buttons: 1});
    el.dispatchEvent(new PointerEvent("pointerdown", opts(r.left + 5, r.top + 5)));
    const moves = [];
    for (let i = 1; i <= 30; i++) {
        t = performance.now();
        vp.dispatchEvent(new PointerEvent("pointermove", opts(r.left + 5 + i * 3, r.top + 5 + i)));
        document.body.offsetHeight;
        moves.push(performance.now() - t);
    }
    vp.dispatchEvent(new PointerEvent("pointerup", opts(r.left + 95, r.top + 35)));
    t = performance.now();
    ed.undo();
    document.body.offsetHeight;
    const undo = performance.now() - t;
    // starting a wire drag type-checks and cycle-checks every port on the canvas
    t = performance.now();
    ed._highlightTargets({from: "n0", out: "candidates", reverse: false});
    document.body.offsetHeight;
    const wire_start = performance.now() - t;
    ed._clearTargets();
    return {load, edit, move: moves, undo, wire_start};
}""".replace("BUILD", BUILD)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def main() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(STATIC)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    results: dict[int, dict[str, float]] = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                     args=["--no-sandbox", "--disable-gpu"])
        for size in SIZES:
            page = browser.new_page(viewport={"width": 1400, "height": 860})
            page.goto(f"http://127.0.0.1:{server.server_port}/editor_harness.html?empty")
            page.wait_for_function("window.ed !== undefined")
            page.evaluate(MEASURE, 20)  # warm up the JIT
            raw = page.evaluate(MEASURE, size)
            results[size] = {"load": raw["load"], "edit": raw["edit"], "undo": raw["undo"],
                             "wire_start": raw["wire_start"], "move_median": statistics.median(raw["move"]),
                             "move_max": max(raw["move"])}
            page.close()
        browser.close()
    server.shutdown()
    small, big = results[SIZES[0]], results[SIZES[1]]
    print(f"{'ms':<14}" + "".join(f"{s:>10} nodes" for s in SIZES) + f"{'ratio':>10}")
    for key in small:
        print(f"{key:<14}" + "".join(f"{results[s][key]:>16.2f}" for s in SIZES) + f"{big[key] / small[key]:>10.1f}x")
    print("(a 60 fps frame is 16.7 ms; move = one pointermove with every node selected, incl. layout)")


if __name__ == "__main__":
    main()
