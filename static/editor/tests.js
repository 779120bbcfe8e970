/* Tests of the editor modules that must not touch the DOM: rules.js, document.js, layout.js (and helpers.js).
 *
 * tests.html loads this file as a module; runEditorTests(fixture) then runs every test in a module Web Worker,
 * where there is no document and no window: a module that touched the DOM fails there. The fixture comes
 * from Python (tests/e2e/test_editor_modules.py), so the rules are checked against their one source:
 *   {rules: graph_rules(), port_table: [[source, target, compatible]], templates: [[text, [vars]]],
 *    node_ids: [[id, valid]], examples: {name: workflow JSON}, schema: registry schema}
 * It resolves with [{name, ok, error?}], one entry per test.
 */

const V = new URL(import.meta.url).search; // the page's ?v=..., if any, passed on to every import
const IN_WORKER = typeof document === "undefined";

// ------------------------------------------------------------------ the page side: run the worker

if (!IN_WORKER) {
  window.runEditorTests = (fixture) => new Promise((resolve, reject) => {
    const worker = new Worker(new URL(`tests.js${V}`, import.meta.url), { type: "module" });
    worker.onmessage = (e) => { worker.terminate(); resolve(e.data); };
    worker.onerror = (e) => { worker.terminate(); reject(new Error(`the test worker failed: ${e.message || e.type}`)); };
    worker.postMessage(fixture);
  });
  const out = document.getElementById("out");
  if (out) out.textContent = "ready: runEditorTests(fixture) runs the tests (tests/e2e/test_editor_modules.py)";
}

// ------------------------------------------------------------------ assertions

function fail(message) { throw new Error(message); }

function show(x) { return JSON.stringify(x); }

/** Deep equality of JSON values, key order ignored. */
function same(a, b) {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== "object") return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) return a.length === b.length && a.every((x, i) => same(x, b[i]));
  const ka = Object.keys(a).sort();
  const kb = Object.keys(b).sort();
  return same(ka, kb) && ka.every((k) => same(a[k], b[k]));
}

function eq(actual, expected, what) {
  if (!same(actual, expected)) fail(`${what}: got ${show(actual)}, expected ${show(expected)}`);
}

function ok(cond, what) { if (!cond) fail(what); }

function throws(fn, pattern, what) {
  try { fn(); } catch (err) {
    if (!pattern.test(String(err && err.message))) fail(`${what}: threw "${err && err.message}", expected ${pattern}`);
    return;
  }
  fail(`${what}: did not throw`);
}

// ------------------------------------------------------------------ the tests (run in the worker)

function defineTests(R, D, L) {
  const tests = [];
  const test = (name, fn) => tests.push([name, fn]);
  const kinds = { inputKind: "input", outputKind: "output" };

  test("rules: missing or malformed rules are refused with a clear error", (fx) => {
    throws(() => R.compileRules(undefined), /options\.rules is required \(nodes\.registry\.graph_rules\(\)\)/,
      "no rules");
    const partial = Object.assign({}, fx.rules);
    delete partial.port_compatibility;
    throws(() => R.compileRules(partial), /port_compatibility/, "rules without port_compatibility");
    const compiled = R.compileRules(fx.rules);
    ok(R.compileRules(compiled) === compiled, "compiling compiled rules gives them back");
    eq([...compiled.reservedIds], fx.rules.reserved_ids, "reserved ids");
    eq([...compiled.reservedVars], fx.rules.reserved_vars, "reserved vars");
  });

  test("rules: port compatibility table is Python's port_compatible", (fx) => {
    const rules = R.compileRules(fx.rules);
    ok(fx.port_table.length >= 16, "the fixture has every pair of port types");
    for (const [source, target, expected] of fx.port_table) {
      eq(R.portCompatible(source, target, rules), expected, `${source} -> ${target}`);
    }
    // the rule as documented: json takes anything, a number may be used as text, the rest must match
    eq(R.portCompatible("number", "text", rules), true, "number -> text");
    eq(R.portCompatible("text", "number", rules), false, "text -> number");
    eq(R.portCompatible("candidates", "text", rules), false, "candidates -> text");
    eq(R.portCompatible("json", "text", rules), false, "json -> text");
    for (const t of rules.portTypes) {
      eq(R.portCompatible(t, "json", rules), true, `${t} -> json`);
      eq(R.portCompatible("any", t, rules), true, `any -> ${t}`);
      eq(R.portCompatible(t, "any", rules), true, `${t} -> any`);
    }
  });

  test("rules: template variables are Python's template_variables", (fx) => {
    ok(fx.templates.length >= 5, "the fixture has templates");
    for (const [text, expected] of fx.templates) eq(R.templateVariables(text, fx.rules), expected, show(text));
    eq(R.templateVariables("{a} and {b}, {a} again", fx.rules), ["a", "b"], "first use order, no repeats");
    eq(R.templateVariables("{{literal}} {x}", fx.rules), ["x"], "{{ }} are literal braces");
    eq(R.templateVariables("{1x} {a.b} { y }", fx.rules), [], "not identifiers");
    eq(R.templateVariables(null, fx.rules), [], "not a string");
    // the compiled pattern is global: calling twice gives the same answer (no lastIndex left over)
    const rules = R.compileRules(fx.rules);
    eq(R.templateVariables("{q}", rules), ["q"], "first call");
    eq(R.templateVariables("{q}", rules), ["q"], "second call");
  });

  test("rules: node id rule is Python's node_id_problem", (fx) => {
    ok(fx.node_ids.length >= 8, "the fixture has ids");
    for (const [id, valid] of fx.node_ids) eq(R.nodeIdProblem(id, fx.rules) === null, valid, `id ${show(id)}`);
    eq(R.nodeIdProblem("inputs", fx.rules), "reserved", "inputs is reserved");
    eq(R.nodeIdProblem("outputs", fx.rules), "reserved", "outputs is reserved");
    eq(R.nodeIdProblem("think-2", fx.rules), null, "letters, digits and -");
    eq(R.nodeIdProblem("a.b", fx.rules), "invalid", "a dot would break refs");
    eq(R.nodeIdProblem("vote x", fx.rules), "invalid", "the pattern is full-matched");
    eq(R.nodeIdProblem("2nd", fx.rules), "invalid", "starts with a digit");
  });

  test("rules: ports of a variadic node follow its visible templates and wires", (fx) => {
    const def = {
      kind: "gen", variadic_inputs: true, inputs: [{ name: "context", type: "text" }],
      outputs: [{ name: "text", type: "text" }],
      params: [
        { name: "method", type: "choice", default: "plain" },
        { name: "prompt", type: "text", default: "" },
        { name: "judge", type: "text", default: "{hidden} {answer}", show_if: { param: "method", values: ["judge"] } },
      ],
    };
    const node = { id: "g", kind: "gen", params: { prompt: "{question} {candidate} {context} {question}" }, raw: {} };
    const names = (ports) => ports.map((p) => p.name);
    eq(names(R.inputPorts(node, def, [], fx.rules)), ["context", "question"],
      "declared, then variables; reserved {candidate} and the hidden param left out");
    node.params.method = "judge";
    eq(names(R.inputPorts(node, def, [], fx.rules)), ["context", "question", "hidden"], "show_if honoured");
    const edges = [{ from: "x", out: "text", to: "g", in: "extra" }];
    const extra = R.inputPorts(node, def, edges, fx.rules).find((p) => p.name === "extra");
    ok(extra && extra.extra && !extra.stale, "a wired extra input of a variadic kind");
    eq(names(R.inputPorts(node, Object.assign({}, def, { reserved_vars: ["question"] }), [], fx.rules)),
      ["context", "candidate", "hidden", "answer"], "a schema entry's own reserved_vars win");
    const plain = Object.assign({}, def, { variadic_inputs: false });
    const stale = R.inputPorts(node, plain, edges, fx.rules).find((p) => p.name === "extra");
    ok(stale && stale.stale, "a wire into a port the kind lacks is stale");
    eq(R.outputPorts({ id: "inputs.n", section: "inputs", params: { type: "number" } }, null, []),
      [{ name: "value", type: "number", description: "the input's value" }], "a number input");
    eq(R.outputPorts({ id: "inputs.n", section: "inputs", params: { type: "odd" } }, null, [])[0].type, "any",
      "an unknown input type");
  });

  test("rules: the schema's io kinds are found, built-ins stand in without them", (fx) => {
    const real = R.readSchema(fx.schema);
    eq([...real.kinds.keys()].sort(), fx.schema.map((e) => e.kind).sort(), "every kind");
    eq(real.inputKind.section, "inputs", "input kind");
    eq(real.outputKind.section, "outputs", "output kind");
    const bare = R.readSchema(fx.schema.filter((e) => e.category !== "io"));
    ok(bare.inputKind === R.BUILTIN_INPUT && bare.outputKind === R.BUILTIN_OUTPUT, "built-in fallbacks");
    const old = R.readSchema([{ kind: "input", category: "io" }, { kind: "output", category: "io" }]);
    eq([old.inputKind.section, old.outputKind.section], ["inputs", "outputs"], "io kinds known by name");
  });

  test("document: every example workflow round-trips", (fx) => {
    const names = Object.keys(fx.examples);
    ok(names.length > 0, "the fixture has examples");
    for (const name of names) {
      const wf = fx.examples[name];
      const { doc, notes } = D.docFromWorkflow(JSON.parse(JSON.stringify(wf)), Object.assign({ rules: fx.rules }, kinds));
      eq(notes, [], `${name}: notes`);
      const wires = wf.nodes.reduce((s, n) => s + Object.keys(n.inputs || {}).length, 0) + Object.keys(wf.outputs).length;
      eq(doc.edges.length, wires, `${name}: every ref became a wire`);
      ok(doc.nodes.every((n) => Object.keys(n.raw).length === 0), `${name}: no dangling refs`);
      eq(doc.nodes.filter((n) => n.section === "inputs").map((n) => n.id),
        Object.keys(wf.inputs || {}).map((k) => `inputs.${k}`), `${name}: input nodes`);
      eq(D.workflowFromDoc(doc), wf, `${name}: round trip`);
    }
  });

  test("document: broken refs and duplicate ids are kept, not lost", (fx) => {
    const wf = {
      version: 1, name: "broken", inputs: { q: "What?", n: 3 },
      nodes: [
        { id: "a", kind: "gen", inputs: { question: "inputs.q", other: "ghost.text", count: "inputs.missing" } },
        { id: "a", kind: "gen", params: { prompt: "{x}" } },
        { id: "inputs", kind: "gen" },
      ],
      outputs: { answer: "a.text", lost: "nowhere.x" },
      layout: { a: [10, 20], "inputs.q": [0.5, "x"] },
    };
    const { doc, notes } = D.docFromWorkflow(wf, Object.assign({ rules: fx.rules }, kinds));
    eq(doc.nodes.map((n) => n.id), ["inputs.q", "inputs.n", "a", "a_2", "inputs_2", "outputs.answer", "outputs.lost"],
      "node ids: duplicates and reserved ids renamed");
    eq(notes.length, 2, "one note per renamed node");
    ok(notes[0].includes('"a_2"'), `note names the new id: ${notes[0]}`);
    const a = doc.nodes[2];
    eq(a.raw, { other: "ghost.text", count: "inputs.missing" }, "unknown refs kept as raw");
    eq([a.x, a.y], [10, 20], "layout read");
    eq(doc.nodes[0].x, null, "a malformed layout entry is ignored");
    eq(doc.nodes[0].params, { name: "q", type: "text", default: "What?" }, "shorthand text input");
    eq(doc.nodes[1].params, { name: "n", type: "number", default: 3 }, "shorthand number input");
    eq(doc.edges, [{ from: "inputs.q", out: "value", to: "a", in: "question" },
      { from: "a", out: "text", to: "outputs.answer", in: "value" }], "wires");
    const back = D.workflowFromDoc(doc);
    eq(back.nodes[0].inputs, { question: "inputs.q", other: "ghost.text", count: "inputs.missing" }, "refs written back");
    eq(back.outputs, { answer: "a.text", lost: "nowhere.x" }, "outputs written back");
    eq(back.inputs, { q: { type: "text", default: "What?" }, n: { type: "number", default: 3 } }, "inputs in full form");
    eq(back.layout, { a: [10, 20] }, "only placed nodes in the layout");
    eq(D.workflowFromDoc(D.emptyDoc()), { version: 1, name: "untitled", nodes: [], outputs: {} }, "empty document");
  });

  const chain = (rules) => {
    const wf = {
      version: 1, name: "chain", inputs: { q: { type: "text" } },
      nodes: [
        { id: "c", kind: "k", inputs: { x: "b.out", y: "a.out" } },
        { id: "b", kind: "k", inputs: { x: "a.out" } },
        { id: "a", kind: "k", inputs: { x: "inputs.q" } },
        { id: "side", kind: "k", inputs: { x: "inputs.q" } },
      ],
      outputs: { answer: "c.out", early: "side.out" },
    };
    return D.docFromWorkflow(wf, Object.assign({ rules }, kinds)).doc;
  };

  /** Every wire goes left to right and no two nodes overlap (default sizes 220 x 110). */
  const checkLayout = (doc, pos, what, sizeOf) => {
    sizeOf = sizeOf || (() => ({}));
    eq([...pos.keys()].sort(), doc.nodes.map((n) => n.id).sort(), `${what}: a position for every node`);
    for (const e of doc.edges) {
      ok(pos.get(e.from).x < pos.get(e.to).x, `${what}: wire ${e.from} -> ${e.to} goes left to right`);
    }
    const boxes = doc.nodes.map((n) => {
      const p = pos.get(n.id);
      const g = sizeOf(n.id);
      return [n.id, p.x, p.y, p.x + (g.w || 220), p.y + (g.h || 110)];
    });
    for (let i = 0; i < boxes.length; i++) {
      for (let j = i + 1; j < boxes.length; j++) {
        const [a, ax0, ay0, ax1, ay1] = boxes[i];
        const [b, bx0, by0, bx1, by1] = boxes[j];
        ok(ax1 <= bx0 || bx1 <= ax0 || ay1 <= by0 || by1 <= ay0, `${what}: ${a} and ${b} overlap`);
      }
    }
  };

  test("layout: nodes are placed in dependency order", (fx) => {
    const doc = chain(fx.rules);
    const pos = L.layeredPositions(doc.nodes, doc.edges);
    checkLayout(doc, pos, "chain");
    const x = (id) => pos.get(id).x;
    ok(x("inputs.q") < x("a") && x("a") < x("b") && x("b") < x("c") && x("c") < x("outputs.answer"),
      "input, a, b, c, output from left to right");
    eq(x("inputs.q"), 0, "inputs in the first column");
    eq(x("outputs.early"), x("outputs.answer"), "outputs share the last column");
    eq(x("side"), x("c"), "a node is pulled next to its consumer");
    for (const name of Object.keys(fx.examples)) {
      const d = D.docFromWorkflow(fx.examples[name], Object.assign({ rules: fx.rules }, kinds)).doc;
      checkLayout(d, L.layeredPositions(d.nodes, d.edges), name);
    }
  });

  test("layout: measured sizes, separate pieces and cycles", (fx) => {
    const doc = chain(fx.rules);
    const wide = (id) => (id === "a" ? { w: 500, h: 300 } : {});
    const pos = L.layeredPositions(doc.nodes, doc.edges, wide);
    checkLayout(doc, pos, "wide a", wide);
    ok(pos.get("b").x >= pos.get("a").x + 500 + 80, "the column after a wide node starts past it");
    // two unconnected pieces: the bigger one first, no overlap between them
    const two = D.docFromWorkflow({
      version: 1, name: "two",
      nodes: [{ id: "p", kind: "k" }, { id: "q", kind: "k", inputs: { x: "p.out" } }, { id: "r", kind: "k", inputs: { x: "q.out" } },
        { id: "s", kind: "k" }, { id: "t", kind: "k", inputs: { x: "s.out" } }],
      outputs: {},
    }, Object.assign({ rules: fx.rules }, kinds)).doc;
    const pos2 = L.layeredPositions(two.nodes, two.edges);
    checkLayout(two, pos2, "two pieces");
    eq([pos2.get("p").x, pos2.get("p").y], [0, 0], "the bigger piece starts at the origin");
    // a cycle (an invalid workflow) must not hang the layout
    const cyc = D.docFromWorkflow({
      version: 1, name: "cycle",
      nodes: [{ id: "u", kind: "k", inputs: { x: "v.out" } }, { id: "v", kind: "k", inputs: { x: "u.out" } }],
      outputs: {},
    }, Object.assign({ rules: fx.rules }, kinds)).doc;
    eq(L.layeredPositions(cyc.nodes, cyc.edges).size, 2, "a cycle gets positions too");
  });

  test("layout: an input wired to nothing yet stays left of the nodes (issue 43 §2.8)", (fx) => {
    const doc = D.docFromWorkflow({
      version: 1, name: "stray",
      inputs: { question: { type: "text" } },
      nodes: [{ id: "sample", kind: "k" }, { id: "vote", kind: "k", inputs: { x: "sample.out" } }],
      outputs: { answer: "vote.out" },
    }, Object.assign({ rules: fx.rules }, kinds)).doc;
    const pos = L.layeredPositions(doc.nodes, doc.edges);
    checkLayout(doc, pos, "stray input");
    ok(pos.get("inputs.question").x < pos.get("sample").x, "the unwired input is left of the sampler");
    eq(pos.get("inputs.question").x, 0, "in the first column");
  });

  return tests;
}

// ------------------------------------------------------------------ the worker side

if (IN_WORKER) {
  const modules = Promise.all(["rules.js", "document.js", "layout.js"].map((name) => import(`./${name}${V}`)));
  self.onmessage = async (e) => {
    const results = [];
    let tests;
    try {
      tests = defineTests(...(await modules));
    } catch (err) {
      self.postMessage([{ name: "the modules load in a worker", ok: false, error: String(err && err.stack || err) }]);
      return;
    }
    results.push({ name: "the modules load in a worker (no DOM)", ok: true });
    for (const [name, fn] of tests) {
      try {
        await fn(e.data);
        results.push({ name, ok: true });
      } catch (err) {
        results.push({ name, ok: false, error: String(err && err.message || err) });
      }
    }
    self.postMessage(results);
  };
}
