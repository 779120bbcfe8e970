/* Metagen Studio node-graph editor: canvas, palette, inspector, undo/redo; speaks workflow JSON.
 *
 * Plain browser JavaScript, no build step, no dependencies. Load static/editor.css and this file, then:
 *
 *   const ed = MetagenEditor.mount(element, {
 *     schema,                      // NodeRegistry.schema(): [{kind,title,category,description,inputs,outputs,
 *                                  //   params,variadic_inputs,uses_model,section?}]; entries with
 *                                  //   section "inputs" / "outputs" are the workflow input / output pseudo-nodes
 *                                  //   (built-in fallbacks are used when the schema has none)
 *     models: ["main"],            // model aliases offered in the `model` select (plus the workflow's own)
 *     onChange(workflow) {},       // debounced (~150 ms) after every user edit; never called by load()
 *     onSelect(nodeId) {},         // selection changed: the single selected node id, or null
 *     onMessage(text, level) {},   // user-facing messages ("info" | "warning" | "error"); also toasted
 *   });
 *   ed.load(workflow, {fit: true, keepHistory: false});  // replace contents (no onChange echo); keeps the
 *                                  // selection where ids survive; a no-op (returns false) when `workflow`
 *                                  // equals getWorkflow(), so echoing the YAML round trip back is safe
 *   ed.getWorkflow();              // workflow JSON = app.workflow.Workflow.to_dict() shape (layout included)
 *   ed.setIssues([{node_id, code, message, hint, line, severity}]);  // node_id null/unknown -> global list
 *   ed.setRunState({node_id: {state, progress, tokens, text, message}}); // merged into the current run state
 *   ed.clearRunState();
 *   ed.undo(); ed.redo(); ed.fitView(ids?); ed.autoLayout();
 *   ed.select(nodeId | [ids] | null);  ed.getSelection();  // programmatic selection (onSelect not fired)
 *   ed.setSchema(schema); ed.setModels(["main"]);
 *   ed.destroy();
 *
 * Node ids of workflow inputs/outputs are "inputs.<name>" / "outputs.<name>" (also in setIssues/setRunState).
 * Run states: queued | running | cached | done | error | skipped.
 *   ed.addNode(kind, {x, y} | null) -> id;  ed.connect(fromId, outPort, toId, inPort) -> bool (refusals are
 *   messaged);  ed.checkConnection(...) -> problem text | null;  ed.deleteSelection(); ed.copySelection();
 *   ed.paste();  ed.openQuickAdd();  ed.message(text, level)  (all undoable edits fire onChange).
 *
 * Test hooks: palette items [data-kind], nodes [data-node-id] (+ data-state while a run state is set),
 * ports [data-port="in:x" | "out:y"], wires [data-wire="src.port->dst.port"], inspector fields
 * [data-param="name"] with their inline errors [data-error-for="name"], and [data-testid] on editor-canvas,
 * editor-palette, editor-inspector, inspector-id, inspector-model, wf-name, wf-description, palette-search,
 * quickadd, quickadd-input, state-badge, run-meta, node-preview, node-error, issue-badge, issue-tip,
 * editor-toast, editor-global-issues, and the toolbar buttons editor-add / -undo / -redo / -delete / -layout /
 * -fit / -zoom-in / -zoom-out / -toggle-palette / -toggle-inspector.
 * Keys (never while typing in a field): Delete/Backspace, Ctrl+Z, Ctrl+Shift+Z / Ctrl+Y, Ctrl+C / X / V
 * (also across tabs via the system clipboard), Ctrl+D duplicate, Ctrl+A, F fit (Shift+F: the selection),
 * "/" or Space quick-add, Esc. Alt+drag a node drags a copy; right-click opens node / wire / canvas menus.
 * ed.togglePanel("palette" | "inspector" | "minimap", show?) hides/shows a panel (toolbar: editor-toggle-palette /
 * editor-toggle-inspector / editor-toggle-minimap; the minimap [data-testid=editor-minimap] pans on click); below 1100 px wide the palette narrows and the inspector floats over the canvas,
 * shown only while something is selected.
 * Mouse: drag background = pan (also middle button, Space+drag); Shift/Ctrl+drag background = rubber band;
 * wheel = zoom at cursor; double-click background, "/" or Space = quick-add; drag output -> input = connect;
 * drag from a connected input = move/detach that wire; click a wire + Delete = disconnect; drop a new wire
 * on empty canvas = quick-add limited to kinds that can take it, wired on Enter (one undo step).
 * Variadic kinds show an input port per {variable} of their visible text params (except the names the node
 * fills itself: RESERVED_VARS, or the schema entry's `reserved_vars`), any extra wired input, and a
 * "+ input" port (data-port="in:+"): a wire dropped there becomes an input named after its source.
 */
(function (global) {
  "use strict";

  // ------------------------------------------------------------------ constants and small helpers

  const TYPE_COLORS = { text: "#3b82f6", number: "#f59e0b", candidates: "#8b5cf6", json: "#10b981", any: "#94a3b8" };
  const CATEGORY_COLORS = { io: "#64748b", generate: "#3b82f6", score: "#f59e0b", aggregate: "#8b5cf6",
    search: "#14b8a6", text: "#ec4899" }; // as in editor.css (.mge-cat-*)
  const CATEGORY_ORDER = ["io", "generate", "score", "aggregate", "search", "text"];
  const CATEGORY_TITLES = {
    io: "Inputs & outputs", generate: "Generate", score: "Score", aggregate: "Aggregate",
    search: "Search", text: "Text", other: "Other",
  };
  const INPUT_TYPES = ["text", "number", "json"];
  const TEMPLATE_VAR = /(?<!\{)\{([A-Za-z_][A-Za-z0-9_]*)\}(?!\})/g;
  const ID_RE = /^[A-Za-z_][A-Za-z0-9_-]*$/;
  const NAME_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;
  const RESERVED_IDS = ["inputs", "outputs"];
  const HISTORY_LIMIT = 200;
  const CHANGE_DEBOUNCE_MS = 150;
  const RUN_STATES = ["queued", "running", "cached", "done", "error", "skipped"];
  const ADD_PORT = "+";
  /** Template variables that scoring / refining kinds fill in themselves (nodes/verify.py RESERVED_VARS);
   * a schema entry may override them with `reserved_vars: [...]`. */
  const RESERVED_VARS = ["candidate", "answer", "reference", "partial", "draft", "problem", "task", "feedback"];

  const BUILTIN_INPUT = {
    kind: "input", title: "Workflow input", category: "io", section: "inputs",
    description: "A value given to the workflow when it runs (a question, a number ...). Use it in prompts as {name}.",
    inputs: [], outputs: [{ name: "value", type: "text", description: "the input's value", required: true }],
    params: [
      { name: "name", type: "str", default: "input", description: "name of the input (an identifier)", required: true },
      { name: "type", type: "choice", default: "text", choices: INPUT_TYPES, description: "value type" },
      { name: "default", type: "json", default: null, description: "value used when none is given" },
      { name: "description", type: "str", default: "", description: "what to enter" },
    ],
    variadic_inputs: false, uses_model: false,
  };
  const BUILTIN_OUTPUT = {
    kind: "output", title: "Workflow output", category: "io", section: "outputs",
    description: "A result of the workflow: wire any node output into it.",
    inputs: [{ name: "value", type: "json", description: "the value to return", required: true }], outputs: [],
    params: [{ name: "name", type: "str", default: "output", description: "name of the output (an identifier)",
      required: true }],
    variadic_inputs: false, uses_model: false,
  };

  function h(tag, attrs, children) {
    const el = document.createElement(tag);
    if (attrs) {
      for (const [k, v] of Object.entries(attrs)) {
        if (v === undefined || v === null || v === false) continue;
        if (k === "class") el.className = v;
        else if (k === "text") el.textContent = v;
        else if (k === "style") el.style.cssText = v;
        else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
        else el.setAttribute(k, v === true ? "" : String(v));
      }
    }
    for (const c of [].concat(children || [])) {
      if (c === null || c === undefined || c === false) continue;
      el.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    }
    return el;
  }

  function svg(tag, attrs) {
    const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
    return el;
  }

  function stableStringify(x) {
    if (Array.isArray(x)) return `[${x.map(stableStringify).join(",")}]`;
    if (x && typeof x === "object") {
      return `{${Object.keys(x).filter((k) => x[k] !== undefined).sort()
        .map((k) => `${JSON.stringify(k)}:${stableStringify(x[k])}`).join(",")}}`;
    }
    return JSON.stringify(x === undefined ? null : x);
  }

  function clone(x) { return x === undefined ? undefined : JSON.parse(JSON.stringify(x)); }
  function equal(a, b) { return JSON.stringify(a) === JSON.stringify(b); }
  function clamp(x, lo, hi) { return Math.max(lo, Math.min(hi, x)); }

  function templateVariables(text) {
    const seen = [];
    if (typeof text !== "string") return seen;
    for (const m of text.matchAll(TEMPLATE_VAR)) if (!seen.includes(m[1])) seen.push(m[1]);
    return seen;
  }

  function portCompatible(source, target) {
    if (source === "any" || target === "any") return true;
    return source === target || target === "json" || (source === "number" && target === "text");
  }

  function splitRef(ref) {
    if (typeof ref !== "string") return null;
    const i = ref.indexOf(".");
    if (i <= 0 || i === ref.length - 1) return null;
    return [ref.slice(0, i), ref.slice(i + 1)];
  }

  function formatValue(v, max) {
    let s;
    if (v === null || v === undefined) s = "—";
    else if (typeof v === "string") s = v.replace(/\s+/g, " ").trim() || "\u2039empty\u203a";
    else if (Array.isArray(v)) s = v.join(", ");
    else if (typeof v === "object") s = JSON.stringify(v);
    else s = String(v);
    return s.length > max ? s.slice(0, max - 1) + "\u2026" : s;
  }

  function isTyping(target) {
    if (!target || !target.closest) return false;
    return Boolean(target.closest("input, textarea, select, [contenteditable=''], [contenteditable='true']"));
  }

  function uniqueName(base, taken) {
    base = String(base || "node").replace(/[^A-Za-z0-9_-]/g, "_").replace(/^([^A-Za-z_])/, "_$1");
    if (!taken.has(base)) return base;
    const stem = base.replace(/_\d+$/, "");
    for (let i = 2; ; i++) if (!taken.has(`${stem}_${i}`)) return `${stem}_${i}`;
  }

  let clipboard = null; // shared by every editor on the page: {nodes, edges}

  // ------------------------------------------------------------------ the editor

  class Editor {
    constructor(element, options) {
      this.host = element;
      this.opts = Object.assign({ schema: [], models: [] }, options || {});
      this.doc = this._emptyDoc();
      this.view = { x: 40, y: 40, z: 1 };
      this.selection = new Set();
      this.selectedWire = null;
      this.issues = [];
      this.runState = {};
      this.undoStack = [];
      this.redoStack = [];
      this.coalesceKey = null;
      this.nodeEls = new Map();
      this.wireEls = new Map();
      this.geom = new Map(); // node id -> {w, h, ports: {"in:x": [dx, dy]}}
      this.drag = null;
      this.spaceDown = false;
      this.spaceUsed = false;
      this.mouse = { x: 0, y: 0, inside: false };
      this.changeTimer = null;
      this.pendingFit = false;
      this.destroyed = false;
      this._setSchema(this.opts.schema);
      this._build();
      this._renderPalette();
      this.render();
      this._renderInspector();
    }

    // ---------------------------------------------------------------- schema

    _setSchema(schema) {
      this.kinds = new Map();
      this.inputKind = BUILTIN_INPUT;
      this.outputKind = BUILTIN_OUTPUT;
      for (let entry of schema || []) {
        if (!entry || !entry.kind) continue;
        if (!entry.section && entry.category === "io" && (entry.kind === "input" || entry.kind === "output")) {
          // registries that do not export `section` yet: the io kinds are known by name
          entry = Object.assign({}, entry, { section: entry.kind === "input" ? "inputs" : "outputs" });
        }
        if (entry.section === "inputs") this.inputKind = entry;
        else if (entry.section === "outputs") this.outputKind = entry;
        this.kinds.set(entry.kind, entry);
      }
      this.kinds.set(this.inputKind.kind, this.inputKind);
      this.kinds.set(this.outputKind.kind, this.outputKind);
    }

    kindDef(kind) { return this.kinds.get(kind) || null; }

    _paramsOf(def) { return (def && def.params) || []; }

    resolvedParams(node) {
      const def = this.kindDef(node.kind);
      const out = {};
      for (const p of this._paramsOf(def)) out[p.name] = p.default;
      return Object.assign(out, node.params || {});
    }

    _paramVisible(param, resolved) {
      const cond = param.show_if;
      if (!cond) return true;
      if (Array.isArray(cond)) return (cond[1] || []).includes(resolved[cond[0]]);
      return (cond.values || []).includes(resolved[cond.param]);
    }

    /** Input ports of a node: declared, template variables (variadic kinds), and any wired extras. */
    inputPorts(node) {
      const def = this.kindDef(node.kind);
      const ports = [];
      const seen = new Set();
      const add = (p) => { if (!seen.has(p.name)) { seen.add(p.name); ports.push(p); } };
      if (node.section === "outputs") {
        add({ name: "value", type: "any", description: "the value to return", required: true });
        return ports;
      }
      if (def) for (const p of def.inputs || []) add(Object.assign({}, p));
      const variadic = Boolean(def && def.variadic_inputs);
      if (variadic) {
        // {variables} of the text params in use (show_if honoured), minus those the node fills itself
        const resolved = this.resolvedParams(node);
        const reserved = new Set(def.reserved_vars || RESERVED_VARS);
        for (const p of this._paramsOf(def)) {
          if (p.type !== "text" || !this._paramVisible(p, resolved)) continue;
          for (const v of templateVariables(resolved[p.name])) {
            if (reserved.has(v)) continue;
            add({ name: v, type: "any", description: `{${v}} in ${p.name}`, required: true, variable: true });
          }
        }
      }
      // wired names beyond those: extra inputs of a variadic kind, or stale wires of any other kind
      const extra = variadic ? { type: "any", required: false, extra: true, description: "an extra input" }
        : { type: "any", required: false, stale: Boolean(def), description: def ? "this node has no such input: delete the wire" : "" };
      for (const e of this.doc.edges) if (e.to === node.id && !seen.has(e.in)) add(Object.assign({ name: e.in }, extra));
      for (const port of Object.keys(node.raw || {})) if (!seen.has(port)) add(Object.assign({ name: port }, extra));
      return ports;
    }

    /** The name a wire dropped on a variadic node's "+ input" port gets: the source's name, made unique. */
    _newPortName(from, out, to) {
      const src = this.node(from);
      const dst = this.node(to);
      const base = src && src.section === "inputs" ? src.params.name : out;
      const taken = new Set(dst ? this.inputPorts(dst).map((p) => p.name) : []);
      let name = String(base).replace(/[^A-Za-z0-9_]/g, "_").replace(/^([^A-Za-z_])/, "_$1") || "input";
      if (!taken.has(name)) return name;
      for (let i = 2; ; i++) if (!taken.has(`${name}_${i}`)) return `${name}_${i}`;
    }

    outputPorts(node) {
      const def = this.kindDef(node.kind);
      if (node.section === "inputs") {
        const t = (node.params && node.params.type) || "text";
        return [{ name: "value", type: INPUT_TYPES.includes(t) ? t : "any", description: "the input's value" }];
      }
      if (node.section === "outputs") return [];
      const ports = def ? (def.outputs || []).map((p) => Object.assign({}, p)) : [];
      for (const e of this.doc.edges) {
        if (e.from === node.id && !ports.some((p) => p.name === e.out)) {
          ports.push({ name: e.out, type: "any", stale: Boolean(def) });
        }
      }
      return ports;
    }

    // ---------------------------------------------------------------- document <-> workflow JSON

    _emptyDoc() {
      return { meta: { version: 1, name: "untitled", description: "", models: {} }, nodes: [], edges: [] };
    }

    /** The node with this id, via an index rebuilt whenever it is found stale. */
    node(id) {
      const hit = this._index && this._indexOf === this.doc.nodes ? this._index.get(id) : undefined;
      if (hit && hit.id === id && this.doc.nodes[hit._pos] === hit) return hit;
      this._index = new Map();
      this._indexOf = this.doc.nodes;
      this.doc.nodes.forEach((n, i) => {
        Object.defineProperty(n, "_pos", { value: i, writable: true, configurable: true, enumerable: false });
        this._index.set(n.id, n);
      });
      return this._index.get(id) || null;
    }

    _docFromWorkflow(wf) {
      wf = wf || {};
      const doc = this._emptyDoc();
      doc.meta.version = wf.version || 1;
      doc.meta.name = wf.name === undefined || wf.name === null ? "untitled" : String(wf.name);
      doc.meta.description = wf.description ? String(wf.description) : "";
      doc.meta.models = wf.models && typeof wf.models === "object" ? clone(wf.models) : {};
      const layout = (wf.layout && typeof wf.layout === "object") ? wf.layout : {};
      const pos = (id) => {
        const p = layout[id];
        return Array.isArray(p) && p.length === 2 && p.every((x) => typeof x === "number") ? p : null;
      };
      const addNode = (n) => {
        const p = pos(n.id);
        n.x = p ? p[0] : null;
        n.y = p ? p[1] : null;
        doc.nodes.push(n);
      };
      const inputs = (wf.inputs && typeof wf.inputs === "object") ? wf.inputs : {};
      for (const [name, spec0] of Object.entries(inputs)) {
        let spec = spec0;
        if (spec === null || typeof spec !== "object") {
          spec = { type: typeof spec0 === "number" ? "number" : "text", default: spec0 };
        }
        const params = { name, type: spec.type || "text" };
        if (spec.default !== undefined && spec.default !== null) params.default = spec.default;
        if (spec.description) params.description = spec.description;
        addNode({ id: `inputs.${name}`, kind: this.inputKind.kind, section: "inputs", model: null, params, raw: {} });
      }
      const nodes = Array.isArray(wf.nodes) ? wf.nodes : [];
      const seenIds = new Set(RESERVED_IDS);
      this.loadNotes = [];
      for (const entry of nodes) {
        if (!entry || typeof entry !== "object") continue;
        let id = entry.id === undefined || entry.id === null ? "" : String(entry.id);
        if (seenIds.has(id)) {
          // two nodes cannot share a canvas slot: the later one gets a fresh id (wires keep the first)
          const fresh = uniqueName(id || "node", seenIds);
          this.loadNotes.push(`node id "${id}" is used twice: the second one is now "${fresh}"`);
          id = fresh;
        }
        seenIds.add(id);
        addNode({
          id,
          kind: String(entry.kind || ""),
          model: entry.model === undefined || entry.model === null ? null : String(entry.model),
          params: entry.params && typeof entry.params === "object" ? clone(entry.params) : {},
          raw: {},
          wiring: entry.inputs && typeof entry.inputs === "object" ? entry.inputs : {},
        });
      }
      const outputs = (wf.outputs && typeof wf.outputs === "object") ? wf.outputs : {};
      for (const name of Object.keys(outputs)) {
        addNode({ id: `outputs.${name}`, kind: this.outputKind.kind, section: "outputs", model: null,
          params: { name }, raw: {}, wiring: { value: outputs[name] } });
      }
      const ids = new Set(doc.nodes.map((n) => n.id));
      for (const n of doc.nodes) {
        const wiring = n.wiring || {};
        delete n.wiring;
        for (const [port, ref] of Object.entries(wiring)) {
          const parts = splitRef(String(ref));
          let src = null;
          let out = null;
          if (parts && parts[0] === "inputs" && ids.has(`inputs.${parts[1]}`)) {
            src = `inputs.${parts[1]}`; out = "value";
          } else if (parts && parts[0] !== "inputs" && parts[0] !== "outputs" && ids.has(parts[0])) {
            src = parts[0]; out = parts[1];
          }
          if (src) doc.edges.push({ from: src, out, to: n.id, in: port });
          else n.raw[port] = String(ref);
        }
      }
      return doc;
    }

    _workflowFromDoc() {
      const d = this.doc;
      const wf = { version: d.meta.version || 1, name: d.meta.name };
      if (d.meta.description) wf.description = d.meta.description;
      if (d.meta.models && Object.keys(d.meta.models).length) wf.models = clone(d.meta.models);
      const inputs = {};
      const nodes = [];
      const outputs = {};
      const layout = {};
      const refOf = (e) => (e.from.startsWith("inputs.") ? e.from : `${e.from}.${e.out}`);
      const wiring = new Map();
      for (const e of d.edges) {
        if (!wiring.has(e.to)) wiring.set(e.to, []);
        wiring.get(e.to).push(e);
      }
      for (const n of d.nodes) {
        if (n.x !== null && n.x !== undefined) layout[n.id] = [Math.round(n.x), Math.round(n.y)];
        const edges = wiring.get(n.id) || [];
        if (n.section === "inputs") {
          const p = n.params || {};
          const spec = { type: p.type || "text" };
          if (p.default !== undefined && p.default !== null && p.default !== "") spec.default = clone(p.default);
          if (p.description) spec.description = p.description;
          inputs[p.name] = spec;
        } else if (n.section === "outputs") {
          const e = edges.find((x) => x.in === "value");
          const ref = e ? refOf(e) : (n.raw && n.raw.value) || "";
          outputs[n.params.name] = ref;
        } else {
          const entry = { id: n.id, kind: n.kind };
          if (n.model) entry.model = n.model;
          if (n.params && Object.keys(n.params).length) entry.params = clone(n.params);
          const ins = {};
          for (const e of edges) ins[e.in] = refOf(e);
          for (const [port, ref] of Object.entries(n.raw || {})) if (!(port in ins)) ins[port] = ref;
          if (Object.keys(ins).length) entry.inputs = ins;
          nodes.push(entry);
        }
      }
      if (Object.keys(inputs).length) wf.inputs = inputs;
      wf.nodes = nodes;
      wf.outputs = outputs;
      if (Object.keys(layout).length) wf.layout = layout;
      return wf;
    }

    // ---------------------------------------------------------------- history and change notification

    _snapshot() { return JSON.stringify(this.doc); }

    /** Apply `fn` to the document as one undoable step; same `coalesce` key in a row = one step. */
    mutate(label, fn, coalesce) {
      const before = this._snapshot();
      const result = fn();
      const after = this._snapshot();
      if (before === after) return result;
      if (!(coalesce && coalesce === this.coalesceKey)) this._pushUndo(before, label);
      this.coalesceKey = coalesce || null;
      this.render();
      this._renderInspector(true); // wiring shown in the inspector may have changed (skipped while typing there)
      this._notifyChange();
      return result;
    }

    _pushUndo(before, label) {
      this.undoStack.push({ snap: before, label });
      if (this.undoStack.length > HISTORY_LIMIT) this.undoStack.shift();
      this.redoStack = [];
      this._updateToolbar();
    }

    _restore(snap) {
      this.doc = JSON.parse(snap);
      for (const id of [...this.selection]) if (!this.node(id)) this.selection.delete(id);
      this.selectedWire = null;
      this.coalesceKey = null;
      this.render();
      this._renderInspector();
      this._notifyChange();
      this._updateToolbar();
    }

    undo() {
      const entry = this.undoStack.pop();
      if (!entry) return false;
      this.redoStack.push({ snap: this._snapshot(), label: entry.label });
      this._restore(entry.snap);
      return true;
    }

    redo() {
      const entry = this.redoStack.pop();
      if (!entry) return false;
      this.undoStack.push({ snap: this._snapshot(), label: entry.label });
      this._restore(entry.snap);
      return true;
    }

    _notifyChange() {
      clearTimeout(this.changeTimer);
      this.changeTimer = setTimeout(() => {
        this.changeTimer = null;
        if (this.destroyed || !this.opts.onChange) return;
        try { this.opts.onChange(this.getWorkflow()); } catch (err) { console.warn("metagen editor onChange:", err); }
      }, CHANGE_DEBOUNCE_MS);
    }

    message(text, level) {
      level = level || "info";
      if (this.opts.onMessage) {
        try { this.opts.onMessage(text, level); } catch (err) { console.warn("metagen editor onMessage:", err); }
      }
      const toast = h("div", { class: `mge-toast-item mge-${level}`, text, role: "status" });
      this.toastEl.appendChild(toast);
      while (this.toastEl.children.length > 4) this.toastEl.firstChild.remove();
      setTimeout(() => toast.classList.add("mge-fade"), 3500);
      setTimeout(() => toast.remove(), 4200);
    }

    // ---------------------------------------------------------------- public API

    load(workflow, options) {
      options = Object.assign({ fit: true, keepHistory: false }, options || {});
      if (this.loaded && stableStringify(workflow) === stableStringify(this.getWorkflow())) return false;
      this.loaded = true;
      const before = this._snapshot();
      this.doc = this._docFromWorkflow(workflow);
      this._placeMissing();
      for (const id of [...this.selection]) if (!this.node(id)) this.selection.delete(id);
      this.selectedWire = null;
      this.coalesceKey = null;
      if (options.keepHistory) this._pushUndo(before, "load");
      else { this.undoStack = []; this.redoStack = []; }
      clearTimeout(this.changeTimer);
      this.render();
      this._renderInspector();
      this._updateToolbar();
      this._emitSelect();
      if (options.fit) this.fitView();
      for (const note of this.loadNotes || []) this.message(note, "warning");
      return true;
    }

    getWorkflow() { return this._workflowFromDoc(); }

    setSchema(schema) {
      this._setSchema(schema);
      for (const n of this.doc.nodes) {
        if (n.section === "inputs") n.kind = this.inputKind.kind;
        if (n.section === "outputs") n.kind = this.outputKind.kind;
      }
      this._renderPalette();
      this.nodeEls.forEach((el) => { el._sig = null; });
      this.render();
      this._renderInspector();
    }

    setModels(models) { this.opts.models = models || []; this._renderInspector(); }

    setIssues(issues) {
      this.issues = Array.isArray(issues) ? issues.slice() : [];
      this.render();
      this._renderGlobalIssues();
      this._renderInspector(true);
    }

    setRunState(states) {
      for (const [id, st] of Object.entries(states || {})) {
        if (st === null) delete this.runState[id];
        else this.runState[id] = Object.assign({}, this.runState[id] || {}, st);
      }
      this.render();
    }

    clearRunState() { this.runState = {}; this.render(); }

    select(ids) {
      this.selection = new Set([].concat(ids || []).filter((id) => this.node(id)));
      this.selectedWire = null;
      this._applySelectionClasses();
      this._renderInspector();
    }

    getSelection() { return [...this.selection]; }

    destroy() {
      this.destroyed = true;
      clearTimeout(this.changeTimer);
      if (this.resizeObserver) this.resizeObserver.disconnect();
      document.removeEventListener("keydown", this._onDocKey, true);
      this._closeMenu();
      this.root.remove();
    }

    // ---------------------------------------------------------------- DOM skeleton

    _build() {
      const tb = (id, label, title, fn) => h("button", { type: "button", class: "mge-btn", "data-testid": `editor-${id}`,
        title, onclick: (e) => { e.preventDefault(); fn(); this.root.focus({ preventScroll: true }); } }, label);
      this.toolbar = h("div", { class: "mge-toolbar" }, [
        tb("add", "+ Add", "Add a node (/ or Space or double-click on the canvas)", () => this.openQuickAdd()),
        h("span", { class: "mge-sep" }),
        tb("undo", "\u21b6 Undo", "Undo (Ctrl+Z)", () => this.undo()),
        tb("redo", "\u21b7 Redo", "Redo (Ctrl+Shift+Z / Ctrl+Y)", () => this.redo()),
        h("span", { class: "mge-sep" }),
        tb("delete", "\u2715 Delete", "Delete the selection (Delete)", () => this.deleteSelection()),
        h("span", { class: "mge-sep" }),
        tb("layout", "\u2637 Auto-layout", "Arrange the nodes left to right", () => this.autoLayout()),
        tb("fit", "\u2922 Fit", "Fit the workflow in view (F)", () => this.fitView()),
        tb("zoom-out", "\u2212", "Zoom out", () => this._zoomBy(1 / 1.2)),
        h("span", { class: "mge-zoom", "data-testid": "editor-zoom" }, "100%"),
        tb("zoom-in", "+", "Zoom in", () => this._zoomBy(1.2)),
        h("span", { class: "mge-grow" }),
        tb("toggle-palette", "\u25e7 Nodes", "Show or hide the node palette", () => this.togglePanel("palette")),
        tb("toggle-minimap", "\u25a3 Map", "Show or hide the minimap", () => this.togglePanel("minimap")),
        tb("toggle-inspector", "\u25e8 Inspector", "Show or hide the inspector", () => this.togglePanel("inspector")),
      ]);
      this.zoomLabel = this.toolbar.querySelector(".mge-zoom");

      this.paletteSearch = h("input", { type: "search", class: "mge-input", placeholder: "Search nodes\u2026",
        "data-testid": "palette-search", "aria-label": "Search nodes" });
      this.paletteSearch.addEventListener("input", () => this._renderPalette());
      this.paletteSearch.addEventListener("keydown", (e) => {
        if (e.key !== "Enter") return;
        // Enter adds the first match
        e.preventDefault();
        const first = this.paletteList.querySelector("[data-kind]");
        if (first) this.addNode(first.getAttribute("data-kind"), null);
      });
      this.paletteList = h("div", { class: "mge-palette-list" });
      this.palette = h("aside", { class: "mge-palette", "data-testid": "editor-palette" },
        [h("div", { class: "mge-panel-title" }, "Nodes"), this.paletteSearch, this.paletteList]);

      this.wiresSvg = svg("svg", { class: "mge-wires", width: 1, height: 1 });
      this.wireLayer = svg("g", {});
      this.tempWire = svg("path", { class: "mge-wire mge-temp", d: "" });
      this.wiresSvg.appendChild(this.wireLayer);
      this.wiresSvg.appendChild(this.tempWire);
      this.nodeLayer = h("div", { class: "mge-node-layer" });
      this.world = h("div", { class: "mge-world" }, [this.wiresSvg, this.nodeLayer]);
      this.band = h("div", { class: "mge-band", hidden: true });
      this.emptyHint = h("div", { class: "mge-empty" },
        "Drag a node from the palette, or double-click here / press / to search.");
      this.globalIssues = h("div", { class: "mge-global-issues", "data-testid": "editor-global-issues", hidden: true });
      this.toastEl = h("div", { class: "mge-toast", "data-testid": "editor-toast", "aria-live": "polite" });
      this.minimap = h("canvas", { class: "mge-minimap", "data-testid": "editor-minimap", width: 180, height: 120,
        title: "Overview: click or drag to move the view" });
      this.viewport = h("div", { class: "mge-viewport", "data-testid": "editor-canvas" },
        [this.world, this.band, this.emptyHint, this.globalIssues, this.minimap, this.toastEl]);
      this.inspector = h("aside", { class: "mge-inspector", "data-testid": "editor-inspector" });
      this.quick = h("div", { class: "mge-quick", hidden: true, "data-testid": "quickadd" });
      this.root = h("div", { class: "mge", tabindex: "0" },
        [this.toolbar, h("div", { class: "mge-body" }, [this.palette, this.viewport, this.inspector]), this.quick]);
      this.host.appendChild(this.root);

      for (const type of ["pointerdown", "pointermove"]) this.minimap.addEventListener(type, (e) => this._onMinimapPointer(e));
      this.minimap.addEventListener("dblclick", (e) => e.stopPropagation());
      this.viewport.addEventListener("pointerdown", (e) => this._onPointerDown(e));
      this.viewport.addEventListener("pointermove", (e) => this._onPointerMove(e));
      this.viewport.addEventListener("pointerup", (e) => this._onPointerUp(e));
      this.viewport.addEventListener("pointercancel", (e) => this._onPointerUp(e));
      this.viewport.addEventListener("dblclick", (e) => this._onDblClick(e));
      this.viewport.addEventListener("wheel", (e) => this._onWheel(e), { passive: false });
      this.viewport.addEventListener("pointerenter", () => { this.mouse.inside = true; });
      this.viewport.addEventListener("pointerleave", () => { this.mouse.inside = false; });
      this.viewport.addEventListener("contextmenu", (e) => this._onContextMenu(e));
      this.viewport.addEventListener("mousedown", (e) => { if (e.button === 1) e.preventDefault(); }); // no autoscroll
      this.palette.addEventListener("pointerdown", (e) => this._onPalettePointerDown(e));
      this.palette.addEventListener("keydown", (e) => {
        const item = e.target.closest && e.target.closest(".mge-palette-item");
        if (item && (e.key === "Enter" || e.key === " ")) { e.preventDefault(); this.addNode(item.getAttribute("data-kind"), null); }
      });
      this.root.addEventListener("keydown", (e) => this._onKeyDown(e));
      this.root.addEventListener("keyup", (e) => this._onKeyUp(e));
      this.root.addEventListener("copy", (e) => this._onCopyEvent(e));
      this.root.addEventListener("paste", (e) => this._onPasteEvent(e));
      this._onDocKey = (e) => {
        if (e.key !== "Escape") return;
        if (!this.quick.hidden) this.closeQuickAdd();
        this._closeMenu();
      };
      document.addEventListener("keydown", this._onDocKey, true);
      if (global.ResizeObserver) {
        this.resizeObserver = new ResizeObserver(() => this._onResize());
        this.resizeObserver.observe(this.viewport);
        this.resizeObserver.observe(this.root);
      }
      this.tip = h("div", { class: "mge-tip", "data-testid": "issue-tip", hidden: true });
      this.viewport.appendChild(this.tip);
      this.viewport.addEventListener("pointerover", (e) => this._onTipOver(e));
      this.viewport.addEventListener("pointerout", (e) => {
        const badge = e.target.closest && e.target.closest(".mge-issue-badge");
        if (badge && !badge.contains(e.relatedTarget)) this.tip.hidden = true;
      });
      this._applyView();
      this._updateToolbar();
      this._applyWidthClasses();
    }

    /** Issue details at screen size (readable at any zoom) while the pointer is on a node's badge. */
    _onTipOver(e) {
      const badge = e.target.closest && e.target.closest(".mge-issue-badge");
      if (!badge || this.drag) return;
      const pop = badge.querySelector(".mge-issue-pop");
      this.tip.textContent = "";
      for (const child of pop.children) this.tip.appendChild(child.cloneNode(true));
      const vr = this.viewport.getBoundingClientRect();
      const br = badge.getBoundingClientRect();
      this.tip.hidden = false;
      const left = clamp(br.left + br.width / 2 - vr.left - 140, 4, Math.max(4, vr.width - 284));
      const below = br.bottom - vr.top + 6;
      const top = below + this.tip.offsetHeight > vr.height ? Math.max(4, br.top - vr.top - this.tip.offsetHeight - 6) : below;
      this.tip.style.left = `${left}px`;
      this.tip.style.top = `${top}px`;
    }

    /** Pan so that node `id` is not hidden under the floating inspector (narrow hosts). */
    _reveal(id) {
      const el = this.nodeEls.get(id);
      if (!el || !this.root.classList.contains("mge-narrow") || getComputedStyle(this.inspector).display === "none") return;
      const nr = el.getBoundingClientRect();
      const ir = this.inspector.getBoundingClientRect();
      const vr = this.viewport.getBoundingClientRect();
      if (nr.right + 12 <= ir.left || nr.bottom < ir.top || nr.top > ir.bottom) return;
      const dx = Math.min(nr.right + 16 - ir.left, Math.max(0, nr.left - vr.left - 16));
      if (dx <= 0) return;
      this.view.x -= dx;
      this._applyView();
    }

    _applyWidthClasses() {
      const width = this.root.clientWidth;
      this.root.classList.toggle("mge-narrow", width > 0 && width < 1100);
      this.root.classList.toggle("mge-tiny", width > 0 && width < 760);
    }

    /** Show/hide the palette or the inspector (`show` undefined = toggle). */
    togglePanel(which, show) {
      const cls = `mge-hide-${which}`;
      const hide = show === undefined ? !this.root.classList.contains(cls) : !show;
      this.root.classList.toggle(cls, hide);
      const b = this.toolbar.querySelector(`[data-testid="editor-toggle-${which}"]`);
      if (b) b.setAttribute("aria-pressed", String(!hide));
      this._scheduleMinimap();
    }

    _onResize() {
      this._applyWidthClasses();
      if (this.viewport.clientWidth === 0) return;
      let stale = false;
      for (const g of this.geom.values()) if (!g.w) { stale = true; break; }
      if (stale) { this.geom.clear(); this.nodeEls.forEach((el) => this._measure(el)); this._renderWires(); }
      if (this.pendingFit) this.fitView();
    }

    _updateToolbar() {
      const set = (id, on, title) => {
        const b = this.toolbar.querySelector(`[data-testid="editor-${id}"]`);
        if (b) { b.disabled = !on; if (title) b.title = title; }
      };
      const lastUndo = this.undoStack[this.undoStack.length - 1];
      const lastRedo = this.redoStack[this.redoStack.length - 1];
      set("undo", Boolean(lastUndo), `Undo${lastUndo ? ` ${lastUndo.label}` : ""} (Ctrl+Z)`);
      set("redo", Boolean(lastRedo), `Redo${lastRedo ? ` ${lastRedo.label}` : ""} (Ctrl+Shift+Z / Ctrl+Y)`);
      set("delete", this.selection.size > 0 || this.selectedWire !== null);
    }

    // ---------------------------------------------------------------- view transform

    _applyView() {
      const v = this.view;
      this.world.style.transform = `translate(${v.x}px, ${v.y}px) scale(${v.z})`;
      const grid = 24 * v.z;
      this.viewport.style.backgroundSize = `${grid}px ${grid}px`;
      this.viewport.style.backgroundPosition = `${v.x}px ${v.y}px`;
      if (this.zoomLabel) this.zoomLabel.textContent = `${Math.round(v.z * 100)}%`;
      this._scheduleMinimap();
    }

    _scheduleMinimap() {
      if (this._minimapFrame || !this.minimap) return;
      const raf = global.requestAnimationFrame || ((fn) => setTimeout(fn, 16));
      this._minimapFrame = raf(() => { this._minimapFrame = null; this._drawMinimap(); });
    }

    /** The overview: every node as a block in its category colour, and the visible area as a frame. */
    _drawMinimap() {
      const cv = this.minimap;
      const show = this.doc.nodes.length > 1 && !this.root.classList.contains("mge-hide-minimap");
      cv.hidden = !show;
      if (!show || !this.viewport.clientWidth) return;
      const b = this._bounds();
      const vw = this.viewport.clientWidth / this.view.z;
      const vh = this.viewport.clientHeight / this.view.z;
      const vx = -this.view.x / this.view.z;
      const vy = -this.view.y / this.view.z;
      const x0 = Math.min(b.x0, vx); const y0 = Math.min(b.y0, vy);
      const x1 = Math.max(b.x1, vx + vw); const y1 = Math.max(b.y1, vy + vh);
      const pad = 6;
      const W = 180;
      const H = 120;
      const dpr = global.devicePixelRatio || 1;
      if (cv.width !== Math.round(W * dpr)) { cv.width = Math.round(W * dpr); cv.height = Math.round(H * dpr); }
      const k = Math.min((W - 2 * pad) / (x1 - x0 || 1), (H - 2 * pad) / (y1 - y0 || 1));
      const ox = pad + ((W - 2 * pad) - (x1 - x0) * k) / 2 - x0 * k;
      const oy = pad + ((H - 2 * pad) - (y1 - y0) * k) / 2 - y0 * k;
      this._minimapMap = { k, ox, oy };
      const ctx = cv.getContext("2d");
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.clearRect(0, 0, W, H);
      for (const n of this.doc.nodes) {
        const g = this.geom.get(n.id) || {};
        const def = this.kindDef(n.kind);
        ctx.fillStyle = CATEGORY_COLORS[def && def.category] || "#94a3b8";
        ctx.globalAlpha = this.selection.has(n.id) ? 1 : 0.7;
        ctx.fillRect(ox + n.x * k, oy + n.y * k, Math.max(2, (g.w || 220) * k), Math.max(2, (g.h || 110) * k));
      }
      ctx.globalAlpha = 1;
      ctx.strokeStyle = "#f97316";
      ctx.lineWidth = 1.5;
      ctx.strokeRect(ox + vx * k, oy + vy * k, vw * k, vh * k);
    }

    _onMinimapPointer(e) {
      const m = this._minimapMap;
      if (!m || (e.type === "pointermove" && !(e.buttons & 1))) return;
      e.preventDefault();
      e.stopPropagation();
      const r = this.minimap.getBoundingClientRect();
      const wx = (e.clientX - r.left - m.ox) / m.k;
      const wy = (e.clientY - r.top - m.oy) / m.k;
      this.view.x = this.viewport.clientWidth / 2 - wx * this.view.z;
      this.view.y = this.viewport.clientHeight / 2 - wy * this.view.z;
      this._applyView();
    }

    toWorld(clientX, clientY) {
      const r = this.viewport.getBoundingClientRect();
      return { x: (clientX - r.left - this.view.x) / this.view.z, y: (clientY - r.top - this.view.y) / this.view.z };
    }

    _zoomAt(factor, clientX, clientY) {
      const r = this.viewport.getBoundingClientRect();
      const sx = clientX - r.left;
      const sy = clientY - r.top;
      const z = clamp(this.view.z * factor, 0.15, 2.5);
      const k = z / this.view.z;
      this.view.x = sx - (sx - this.view.x) * k;
      this.view.y = sy - (sy - this.view.y) * k;
      this.view.z = z;
      this._applyView();
    }

    _zoomBy(factor) {
      const r = this.viewport.getBoundingClientRect();
      this._zoomAt(factor, r.left + r.width / 2, r.top + r.height / 2);
    }

    _bounds(ids) {
      let x0 = Infinity; let y0 = Infinity; let x1 = -Infinity; let y1 = -Infinity;
      for (const n of this.doc.nodes) {
        if (ids && !ids.has(n.id)) continue;
        const g = this.geom.get(n.id) || { w: 220, h: 100 };
        x0 = Math.min(x0, n.x); y0 = Math.min(y0, n.y);
        x1 = Math.max(x1, n.x + (g.w || 220)); y1 = Math.max(y1, n.y + (g.h || 100));
      }
      return x0 === Infinity ? null : { x0, y0, x1, y1 };
    }

    /** Zoom and pan so that every node (or just the nodes in `ids`) is in view. */
    fitView(ids) {
      const w = this.viewport.clientWidth;
      const hgt = this.viewport.clientHeight;
      if (!w || !hgt) { this.pendingFit = true; return; }
      this.pendingFit = false;
      const only = ids && [].concat(ids).length ? new Set([].concat(ids)) : null;
      const b = this._bounds(only);
      if (!b) { this.view = { x: 40, y: 40, z: 1 }; this._applyView(); return; }
      const pad = 40;
      const z = clamp(Math.min((w - 2 * pad) / (b.x1 - b.x0 || 1), (hgt - 2 * pad) / (b.y1 - b.y0 || 1)), 0.15, 1.2);
      this.view.z = z;
      this.view.x = (w - (b.x1 - b.x0) * z) / 2 - b.x0 * z;
      this.view.y = (hgt - (b.y1 - b.y0) * z) / 2 - b.y0 * z;
      this._applyView();
    }

    // ---------------------------------------------------------------- rendering

    render() {
      const present = new Set();
      const changed = [];
      const issuesByNode = this._issuesByNode();
      const wiredIn = new Map();
      const wiredOut = new Map();
      for (const e of this.doc.edges) {
        if (!wiredIn.has(e.to)) wiredIn.set(e.to, []);
        wiredIn.get(e.to).push(e.in);
        if (!wiredOut.has(e.from)) wiredOut.set(e.from, []);
        wiredOut.get(e.from).push(e.out);
      }
      for (const n of this.doc.nodes) {
        present.add(n.id);
        let el = this.nodeEls.get(n.id);
        if (!el) {
          el = h("div", { class: "mge-node" });
          el._nodeId = n.id;
          this.nodeEls.set(n.id, el);
          this.nodeLayer.appendChild(el);
        }
        const sig = JSON.stringify([n.id, n.kind, n.model, n.params, n.raw, n.section,
          (wiredIn.get(n.id) || []).sort(), [...new Set(wiredOut.get(n.id) || [])].sort(),
          issuesByNode.get(n.id) || null, this.runState[n.id] || null]);
        if (el._sig !== sig) {
          el._sig = sig;
          this._renderNode(el, n, issuesByNode.get(n.id) || []);
          changed.push(el);
        }
        const transform = `translate(${n.x}px, ${n.y}px)`;
        if (el._transform !== transform) { el.style.transform = transform; el._transform = transform; }
      }
      // measure after all DOM writes: one layout for the whole batch
      for (const el of changed) this._measure(el);
      if (changed.length && this.tip) this.tip.hidden = true; // its badge may have been replaced
      for (const [id, el] of [...this.nodeEls]) {
        if (!present.has(id)) { el.remove(); this.nodeEls.delete(id); this.geom.delete(id); }
      }
      this._applySelectionClasses();
      this._renderWires();
      this.emptyHint.hidden = this.doc.nodes.length > 0;
      this._updateToolbar();
      this._scheduleMinimap();
    }

    _issuesByNode() {
      const map = new Map();
      for (const issue of this.issues) {
        if (issue && issue.node_id && this.node(issue.node_id)) {
          if (!map.has(issue.node_id)) map.set(issue.node_id, []);
          map.get(issue.node_id).push(issue);
        }
      }
      return map;
    }

    _wiredInputs(id) { return this.doc.edges.filter((e) => e.to === id).map((e) => e.in).sort(); }
    _wiredOutputs(id) { return [...new Set(this.doc.edges.filter((e) => e.from === id).map((e) => e.out))].sort(); }

    _renderNode(el, n, issues) {
      const def = this.kindDef(n.kind);
      const run = this.runState[n.id] || null;
      const category = def ? def.category || "other" : "unknown";
      el.className = "mge-node";
      el.classList.add(`mge-cat-${String(category).replace(/[^a-z0-9_-]/gi, "")}`);
      if (!def) el.classList.add("mge-unknown");
      if (n.section) el.classList.add(`mge-io-${n.section}`);
      el.setAttribute("data-node-id", n.id);
      el.setAttribute("data-kind", n.kind);
      const errors = issues.filter((i) => (i.severity || "error") === "error");
      if (errors.length) el.classList.add("mge-has-error");
      else if (issues.length) el.classList.add("mge-has-warning");
      if (run && RUN_STATES.includes(run.state)) {
        el.classList.add(`mge-state-${run.state}`);
        el.setAttribute("data-state", run.state);
      } else el.removeAttribute("data-state");
      el.textContent = "";

      const title = n.section ? n.params.name : (def ? def.title || def.kind : n.kind);
      const header = h("div", { class: "mge-node-header", title: def ? def.description || "" : `unknown kind ${n.kind}` }, [
        n.section ? h("span", { class: "mge-io-tag" }, n.section === "inputs" ? "input" : "output") : null,
        h("span", { class: "mge-node-title" }, title),
        n.section ? null : h("span", { class: "mge-node-id" }, n.id),
      ]);
      if (run && run.state) {
        header.appendChild(h("span", { class: "mge-state-badge", "data-testid": "state-badge" }, run.state));
      }
      if (issues.length) {
        const pop = h("div", { class: "mge-issue-pop" }, issues.map((i) => h("div", { class: "mge-issue-line" }, [
          h("b", {}, i.code ? `${i.code}: ` : ""), i.message || "",
          i.hint ? h("div", { class: "mge-issue-hint" }, `\u2192 ${i.hint}`) : null,
        ])));
        header.appendChild(h("span", {
          class: "mge-issue-badge", "data-testid": "issue-badge",
          title: issues.map((i) => `${i.message}${i.hint ? ` (${i.hint})` : ""}`).join("\n"),
        }, [String(issues.length), pop]));
      }
      el.appendChild(header);

      const ports = h("div", { class: "mge-ports" });
      const ins = this.inputPorts(n);
      const outs = this.outputPorts(n);
      if (def && def.variadic_inputs && !n.section) {
        ins.push({ name: ADD_PORT, type: "any", add: true, description: "drop a wire here to add an input" });
      }
      const wiredIn = new Set(this._wiredInputs(n.id));
      const badPorts = new Map(); // input port -> issue message (missing_input, type_mismatch, unknown_ref ...)
      for (const i of issues) {
        const m = /input '([^']+)'/.exec(i.message || "");
        if (m && !badPorts.has(m[1])) badPorts.set(m[1], i.message);
      }
      const wiredOut = new Set(this._wiredOutputs(n.id));
      const rows = Math.max(ins.length, outs.length);
      for (let i = 0; i < rows; i++) {
        const row = h("div", { class: "mge-port-row" });
        const pin = ins[i];
        if (pin) {
          const raw = n.raw && n.raw[pin.name];
          row.appendChild(h("div", {
            class: `mge-port mge-in${wiredIn.has(pin.name) ? " mge-wired" : ""}${pin.stale ? " mge-stale" : ""}` +
              `${pin.add ? " mge-add-port" : ""}${pin.extra ? " mge-extra" : ""}` +
              `${raw ? " mge-dangling" : ""}${pin.required && !wiredIn.has(pin.name) && !raw ? " mge-required" : ""}` +
              `${badPorts.has(pin.name) ? " mge-port-bad" : ""}`,
            "data-port": `in:${pin.name}`, "data-type": pin.type,
            title: `${pin.name}: ${pin.type}${pin.description ? ` \u2014 ${pin.description}` : ""}` +
              `${raw ? `\nwired to ${raw}, which does not exist` : ""}`,
          }, [h("span", { class: "mge-dot", style: `--c:${TYPE_COLORS[pin.type] || TYPE_COLORS.any}` }),
            h("span", { class: "mge-port-label" }, pin.add ? "+ input" : pin.variable ? `{${pin.name}}` : pin.name)]));
        } else row.appendChild(h("div", { class: "mge-port-spacer" }));
        const pout = outs[i];
        if (pout) {
          row.appendChild(h("div", {
            class: `mge-port mge-out${wiredOut.has(pout.name) ? " mge-wired" : ""}${pout.stale ? " mge-stale" : ""}`,
            "data-port": `out:${pout.name}`, "data-type": pout.type,
            title: `${pout.name}: ${pout.type}${pout.description ? ` \u2014 ${pout.description}` : ""}`,
          }, [h("span", { class: "mge-port-label" }, pout.name),
            h("span", { class: "mge-dot", style: `--c:${TYPE_COLORS[pout.type] || TYPE_COLORS.any}` })]));
        }
        ports.appendChild(row);
      }
      el.appendChild(ports);

      const summary = this._summaryRows(n, def);
      if (summary.length) {
        el.appendChild(h("div", { class: "mge-summary" }, summary.map(([k, v, set]) =>
          h("div", { class: `mge-summary-row${set ? " mge-set" : ""}` },
            [h("span", { class: "mge-k" }, k), h("span", { class: "mge-v" }, v)]))));
      }
      if (run) {
        if (run.state === "running" || typeof run.progress === "number" || run.tokens) {
          const pct = typeof run.progress === "number" ? clamp(run.progress, 0, 1) * 100 : null;
          el.appendChild(h("div", { class: "mge-progress" }, [
            h("div", { class: `mge-bar${pct === null ? " mge-indeterminate" : ""}`,
              style: pct === null ? "" : `width:${pct.toFixed(1)}%` }),
          ]));
          const bits = [];
          if (pct !== null) bits.push(`${Math.round(pct)}%`);
          if (run.tokens) bits.push(`${run.tokens} tok`);
          if (bits.length) el.appendChild(h("div", { class: "mge-run-meta", "data-testid": "run-meta" }, bits.join(" \u00b7 ")));
        }
        if (run.text && run.state === "running") {
          const text = String(run.text);
          el.appendChild(h("div", { class: "mge-preview", "data-testid": "node-preview" },
            text.length > 400 ? "\u2026" + text.slice(-400) : text));
        }
        if (run.state === "error" && run.message) {
          el.appendChild(h("div", { class: "mge-run-error", "data-testid": "node-error" }, String(run.message)));
        }
      }
    }

    _summaryRows(n, def) {
      const rows = [];
      if (n.section === "inputs") {
        rows.push(["type", n.params.type || "text", true]);
        if (n.params.default !== undefined && n.params.default !== null) rows.push(["default", formatValue(n.params.default, 34), true]);
        return rows;
      }
      if (n.section === "outputs" || !def) {
        if (!def && !n.section) rows.push(["kind", `unknown: ${n.kind || "(none)"}`, true]);
        return rows;
      }
      if (def.uses_model && n.model) rows.push(["model", n.model, true]);
      const resolved = this.resolvedParams(n);
      const params = this._paramsOf(def).filter((p) => this._paramVisible(p, resolved));
      const set = params.filter((p) => n.params && p.name in n.params);
      const unset = params.filter((p) => !(n.params && p.name in n.params) && p.default !== null && p.default !== "");
      for (const p of set.concat(unset).slice(0, 4)) rows.push([p.name, formatValue(resolved[p.name], 34), p.name in (n.params || {})]);
      return rows;
    }

    _measure(el) {
      const id = el._nodeId;
      const w = el.offsetWidth;
      const g = { w, h: el.offsetHeight, ports: {} };
      if (w) {
        for (const port of el.querySelectorAll("[data-port]")) {
          const dot = port.querySelector(".mge-dot");
          let x = dot.offsetWidth / 2;
          let y = dot.offsetHeight / 2;
          let cur = dot;
          while (cur && cur !== el) { x += cur.offsetLeft; y += cur.offsetTop; cur = cur.offsetParent; }
          g.ports[port.getAttribute("data-port")] = [x, y];
        }
      }
      this.geom.set(id, g);
    }

    _portPos(nodeId, key) {
      const n = this.node(nodeId);
      const g = this.geom.get(nodeId);
      if (!n) return null;
      const off = g && g.ports[key];
      if (!off) return { x: n.x + (key.startsWith("out:") ? (g && g.w) || 200 : 0), y: n.y + 20 };
      return { x: n.x + off[0], y: n.y + off[1] };
    }

    _wirePath(a, b) {
      const dx = Math.max(40, Math.abs(b.x - a.x) * 0.5);
      return `M${a.x},${a.y} C${a.x + dx},${a.y} ${b.x - dx},${b.y} ${b.x},${b.y}`;
    }

    _edgeKey(e) { return `${e.from}.${e.out}->${e.to}.${e.in}`; }

    _renderWires(onlyNodes) {
      const present = new Set();
      const outTypes = new Map();
      const outType = (id, port) => {
        if (!outTypes.has(id)) {
          const src = this.node(id);
          outTypes.set(id, new Map(src ? this.outputPorts(src).map((p) => [p.name, p.type]) : []));
        }
        return outTypes.get(id).get(port) || "any";
      };
      for (const e of this.doc.edges) {
        const key = this._edgeKey(e);
        present.add(key);
        if (onlyNodes && !onlyNodes.has(e.from) && !onlyNodes.has(e.to)) continue;
        let w = this.wireEls.get(key);
        if (!w) {
          const g = svg("g", { class: "mge-wire-group", "data-wire": key });
          const tip = svg("title", {});
          tip.textContent = `${e.from}.${e.out} \u2192 ${e.to}.${e.in}`;
          g.appendChild(tip);
          g._hit = g.appendChild(svg("path", { class: "mge-wire-hit", d: "" }));
          g._path = g.appendChild(svg("path", { class: "mge-wire", d: "" }));
          g._edge = e;
          this.wireLayer.appendChild(g);
          w = g;
          this.wireEls.set(key, w);
        }
        w._edge = e;
        const a = this._portPos(e.from, `out:${e.out}`);
        const b = this._portPos(e.to, `in:${e.in}`);
        if (!a || !b) continue;
        const d = this._wirePath(a, b);
        if (w._d !== d) { w._hit.setAttribute("d", d); w._path.setAttribute("d", d); w._d = d; }
        const stroke = TYPE_COLORS[outType(e.from, e.out)] || TYPE_COLORS.any;
        if (w._stroke !== stroke) { w._path.style.stroke = stroke; w._stroke = stroke; }
        const runFrom = this.runState[e.from];
        w.classList.toggle("mge-flowing", Boolean(runFrom && runFrom.state === "done" &&
          this.runState[e.to] && this.runState[e.to].state === "running"));
        w.classList.toggle("mge-selected", this.selectedWire === key);
      }
      if (!onlyNodes) {
        for (const [key, w] of [...this.wireEls]) if (!present.has(key)) { w.remove(); this.wireEls.delete(key); }
      }
    }

    _applySelectionClasses() {
      for (const [id, el] of this.nodeEls) el.classList.toggle("mge-selected", this.selection.has(id));
      for (const [key, w] of this.wireEls) w.classList.toggle("mge-selected", this.selectedWire === key);
      this._updateToolbar();
    }

    _renderGlobalIssues() {
      const global_ = this.issues.filter((i) => i && (!i.node_id || !this.node(i.node_id)));
      this.globalIssues.textContent = "";
      this.globalIssues.hidden = global_.length === 0;
      for (const i of global_) {
        this.globalIssues.appendChild(h("div", { class: `mge-global-issue mge-${i.severity || "error"}` }, [
          h("b", {}, `${i.line ? `line ${i.line}: ` : ""}${i.node_id ? `[${i.node_id}] ` : ""}`), i.message || "",
          i.hint ? h("span", { class: "mge-issue-hint" }, ` \u2192 ${i.hint}`) : null,
        ]));
      }
    }

    // ---------------------------------------------------------------- palette

    _paletteEntries() {
      const entries = [...this.kinds.values()];
      return entries;
    }

    _matches(def, q) {
      if (!q) return true;
      const hay = `${def.kind} ${def.title || ""} ${def.category || ""} ${def.description || ""}`.toLowerCase();
      return q.toLowerCase().split(/\s+/).filter(Boolean).every((w) => hay.includes(w));
    }

    /** Search rank of a kind for `q` (lower is better; Infinity = no match). */
    _rank(def, q) {
      if (!this._matches(def, q)) return Infinity;
      q = q.toLowerCase().trim();
      if (!q) return 0;
      const kind = def.kind.toLowerCase();
      const title = (def.title || "").toLowerCase();
      if (kind === q || title === q) return 0;
      if (kind.startsWith(q) || title.startsWith(q)) return 1;
      if (kind.includes(q) || title.includes(q)) return 2;
      if ((def.category || "").toLowerCase().includes(q)) return 3;
      return 4;
    }

    _groups(defs) {
      const groups = new Map();
      for (const def of defs) {
        const cat = def.category || "other";
        if (!groups.has(cat)) groups.set(cat, []);
        groups.get(cat).push(def);
      }
      const order = [...groups.keys()].sort((a, b) => {
        const ia = CATEGORY_ORDER.indexOf(a); const ib = CATEGORY_ORDER.indexOf(b);
        return (ia < 0 ? 99 : ia) - (ib < 0 ? 99 : ib) || a.localeCompare(b);
      });
      return order.map((cat) => [cat, groups.get(cat)]);
    }

    _renderPalette() {
      const q = this.paletteSearch.value.trim();
      this.paletteList.textContent = "";
      const defs = this._paletteEntries().filter((d) => this._matches(d, q));
      for (const [cat, items] of this._groups(defs)) {
        const group = h("div", { class: "mge-palette-group", "data-category": cat },
          [h("div", { class: "mge-group-title" }, CATEGORY_TITLES[cat] || cat)]);
        for (const def of items) {
          group.appendChild(h("div", {
            class: `mge-palette-item mge-cat-${String(cat).replace(/[^a-z0-9_-]/gi, "")}`, "data-kind": def.kind,
            title: def.description || def.kind, role: "button", tabindex: "0",
          }, [h("span", { class: "mge-swatch" }), h("span", { class: "mge-item-title" }, def.title || def.kind),
            h("span", { class: "mge-item-kind" }, def.kind)]));
        }
        this.paletteList.appendChild(group);
      }
      if (!defs.length) this.paletteList.appendChild(h("div", { class: "mge-muted" }, "No node matches."));
    }

    _onPalettePointerDown(e) {
      const item = e.target.closest(".mge-palette-item");
      if (!item || e.button !== 0) return;
      e.preventDefault();
      const kind = item.getAttribute("data-kind");
      const ghost = h("div", { class: "mge-ghost" }, item.querySelector(".mge-item-title").textContent);
      const start = { x: e.clientX, y: e.clientY };
      let moved = false;
      const move = (ev) => {
        if (!moved && Math.hypot(ev.clientX - start.x, ev.clientY - start.y) > 4) {
          moved = true;
          document.body.appendChild(ghost);
        }
        if (moved) { ghost.style.left = `${ev.clientX + 8}px`; ghost.style.top = `${ev.clientY + 8}px`; }
      };
      const up = (ev) => {
        document.removeEventListener("pointermove", move, true);
        document.removeEventListener("pointerup", up, true);
        ghost.remove();
        if (!moved) { this.addNode(kind, null); return; }
        const r = this.viewport.getBoundingClientRect();
        if (ev.clientX >= r.left && ev.clientX <= r.right && ev.clientY >= r.top && ev.clientY <= r.bottom) {
          const p = this.toWorld(ev.clientX, ev.clientY);
          this.addNode(kind, { x: p.x - 20, y: p.y - 14 });
        }
        this.root.focus({ preventScroll: true });
      };
      document.addEventListener("pointermove", move, true);
      document.addEventListener("pointerup", up, true);
    }

    // ---------------------------------------------------------------- editing operations

    _takenIds() { return new Set(this.doc.nodes.filter((n) => !n.section).map((n) => n.id).concat(RESERVED_IDS)); }
    _takenNames(section) {
      return new Set(this.doc.nodes.filter((n) => n.section === section).map((n) => n.params.name));
    }

    _newNode(kind, at) {
      const def = this.kindDef(kind);
      if (!def) return null;
      let node;
      if (def.section === "inputs" || def.section === "outputs") {
        const section = def.section;
        const base = section === "inputs" ? (this._takenNames("inputs").size ? "input" : "question")
          : (this._takenNames("outputs").size ? "output" : "answer");
        const name = uniqueName(base, this._takenNames(section));
        const params = section === "inputs" ? { name, type: "text" } : { name };
        node = { id: `${section}.${name}`, kind, section, model: null, params, raw: {} };
      } else {
        node = { id: uniqueName(kind, this._takenIds()), kind, model: null, params: {}, raw: {} };
      }
      const p = at || this._freeSpot();
      node.x = Math.round(p.x);
      node.y = Math.round(p.y);
      return node;
    }

    /** A spot near the middle of the view where a new node overlaps no other node. */
    _freeSpot() {
      const r = this.viewport.getBoundingClientRect();
      const c = this.toWorld(r.left + (r.width || 600) / 2, r.top + (r.height || 400) / 2);
      const boxes = this.doc.nodes.map((n) => {
        const g = this.geom.get(n.id) || {};
        return [n.x - 20, n.y - 20, n.x + (g.w || 220) + 20, n.y + (g.h || 110) + 20];
      });
      const free = (x, y) => !boxes.some((b) => x < b[2] && x + 220 > b[0] && y < b[3] && y + 120 > b[1]);
      const x0 = c.x - 110;
      const y0 = c.y - 60;
      for (let ring = 0; ring < 40; ring++) {
        const step = 40;
        for (let i = -ring; i <= ring; i++) {
          for (const [dx, dy] of [[i, ring], [i, -ring], [ring, i], [-ring, i]]) {
            if (free(x0 + dx * step, y0 + dy * step)) return { x: x0 + dx * step, y: y0 + dy * step };
          }
        }
      }
      return { x: x0, y: y0 };
    }

    /** Add a node of `kind` at world position `at` (null: a free spot in view); returns its id. */
    addNode(kind, at, setup, coalesce) {
      const node = this._newNode(kind, at);
      if (!node) { this.message(`unknown node kind ${kind}`, "error"); return null; }
      if (setup) setup(node);
      this.mutate(`add ${kind}`, () => { this.doc.nodes.push(node); }, coalesce);
      this.selection = new Set([node.id]);
      this.selectedWire = null;
      this._applySelectionClasses();
      this._renderInspector();
      this._emitSelect();
      this._reveal(node.id);
      return node.id;
    }

    _reaches(from, to) {
      // whether `to` is reachable from `from` along the wires
      const succ = this._buildAdjacency();
      const seen = new Set([from]);
      const stack = [from];
      while (stack.length) {
        const cur = stack.pop();
        if (cur === to) return true;
        for (const next of succ.get(cur) || []) if (!seen.has(next)) { seen.add(next); stack.push(next); }
      }
      return false;
    }

    /** Check a connection; returns an error message or null. */
    checkConnection(from, out, to, inp) {
      const src = this.node(from);
      const dst = this.node(to);
      if (!src || !dst) return "unknown node";
      const sp = this.outputPorts(src).find((p) => p.name === out);
      const dstDef = this.kindDef(dst.kind);
      const dp = inp === ADD_PORT && dstDef && dstDef.variadic_inputs && !dst.section ? { name: ADD_PORT, type: "any" }
        : this.inputPorts(dst).find((p) => p.name === inp);
      if (!sp || !dp) return `no such port ${!sp ? out : inp}`;
      if (from === to) return `cannot connect ${from} to itself`;
      if (!portCompatible(sp.type, dp.type)) {
        return `cannot connect ${sp.type} to ${dp.type}: ${from}.${out} is ${sp.type}, ${to}.${inp} expects ${dp.type}`;
      }
      if (this._reaches(to, from)) return `cannot connect ${from}.${out} to ${to}.${inp}: that would make a cycle`;
      return null;
    }

    connect(from, out, to, inp, coalesce) {
      const problem = this.checkConnection(from, out, to, inp);
      if (problem) { this.message(problem, "error"); return false; }
      if (inp === ADD_PORT) inp = this._newPortName(from, out, to);
      this.mutate("connect", () => {
        const edge = { from, out, to, in: inp };
        const i = this.doc.edges.findIndex((e) => e.to === to && e.in === inp);
        if (i >= 0) this.doc.edges[i] = edge;
        else this.doc.edges.push(edge);
        const dst = this.node(to);
        if (dst.raw) delete dst.raw[inp];
      }, coalesce);
      return true;
    }

    /** How a new node of kind `def` would take the pending wire: {port, setup} or null. */
    _wirePlan(def, pending) {
      if (pending.from) {
        if (def.section === "inputs") return null;
        if (def.section === "outputs") return { port: "value" };
        const port = (def.inputs || []).find((p) => portCompatible(pending.type, p.type));
        if (port) return { port: port.name };
        const textParam = def.variadic_inputs && this._paramsOf(def).find((p) => p.type === "text");
        if (!textParam) return null;
        const src = this.node(pending.from);
        const variable = src && src.section === "inputs" ? src.params.name : pending.out;
        return { port: variable, setup: (n) => { n.params[textParam.name] = `{${variable}}`; } };
      }
      if (def.section === "outputs") return null;
      if (def.section === "inputs") {
        const type = pending.type === "any" ? "text" : pending.type;
        if (!INPUT_TYPES.includes(type)) return null;
        return { port: "value", setup: (n) => { n.params.type = type; } };
      }
      const port = (def.outputs || []).find((p) => portCompatible(p.type, pending.type));
      return port ? { port: port.name } : null;
    }

    /** Add a node of `kind` and wire it to the pending connection, as one undo step. */
    _addWired(kind, at, pending) {
      const def = this.kindDef(kind);
      const plan = def && this._wirePlan(def, pending);
      if (!plan) return this.addNode(kind, at);
      const key = `wire-add:${Date.now()}:${Math.random()}`;
      const id = this.addNode(kind, pending.from ? at : { x: at.x - 230, y: at.y }, plan.setup, key);
      if (id && pending.from) this.connect(pending.from, pending.out, id, plan.port, key);
      else if (id) this.connect(id, plan.port, pending.to, pending.in, key);
      this.coalesceKey = null;
      return id;
    }

    disconnect(key) {
      this.mutate("disconnect", () => {
        this.doc.edges = this.doc.edges.filter((e) => this._edgeKey(e) !== key);
      });
      if (this.selectedWire === key) this.selectedWire = null;
    }

    deleteSelection() {
      if (this.selection.size) {
        const ids = new Set(this.selection);
        this.mutate("delete", () => {
          this.doc.nodes = this.doc.nodes.filter((n) => !ids.has(n.id));
          this.doc.edges = this.doc.edges.filter((e) => !ids.has(e.from) && !ids.has(e.to));
        });
        this.selection.clear();
        this._renderInspector();
        this._emitSelect();
      } else if (this.selectedWire) {
        this.disconnect(this.selectedWire);
      }
      this._updateToolbar();
    }

    copySelection(quiet) {
      if (!this.selection.size) return false;
      const ids = new Set(this.selection);
      clipboard = {
        nodes: clone(this.doc.nodes.filter((n) => ids.has(n.id))),
        edges: clone(this.doc.edges.filter((e) => ids.has(e.from) && ids.has(e.to))),
      };
      if (!quiet) this.message(`copied ${ids.size} node${ids.size > 1 ? "s" : ""}`, "info");
      return true;
    }

    /** Move `nodes` (not yet in the document) down until they overlap no existing node. */
    _shiftClear(nodes, originalIds) {
      const boxOf = (n, origId) => {
        const g = this.geom.get(origId || n.id) || {};
        return [n.x, n.y, n.x + (g.w || 220), n.y + (g.h || 110)];
      };
      const existing = this.doc.nodes.map((n) => boxOf(n));
      const overlaps = (dy) => nodes.some((n, i) => {
        const [x0, y0, x1, y1] = boxOf(n, originalIds[i]);
        return existing.some((b) => x0 < b[2] + 10 && x1 + 10 > b[0] && y0 + dy < b[3] + 10 && y1 + dy + 10 > b[1]);
      });
      let dy = 0;
      for (let i = 0; i < 60 && overlaps(dy); i++) dy += 30;
      if (dy) for (const n of nodes) n.y += dy;
    }

    _pastePoint() { return this.mouse.inside ? this.toWorld(this.mouse.x, this.mouse.y) : null; }

    _onCopyEvent(e) {
      if (isTyping(e.target) || !this.selection.size || !e.clipboardData) return;
      const sel = global.getSelection && global.getSelection();
      if (sel && String(sel).length) return;
      const ids = new Set(this.selection);
      const data = { metagen_editor_clipboard: 1, nodes: this.doc.nodes.filter((n) => ids.has(n.id)),
        edges: this.doc.edges.filter((x) => ids.has(x.from) && ids.has(x.to)) };
      e.clipboardData.setData("text/plain", JSON.stringify(data));
      e.preventDefault();
    }

    _onPasteEvent(e) {
      if (isTyping(e.target) || !e.clipboardData) return;
      let data = null;
      try { data = JSON.parse(e.clipboardData.getData("text/plain")); } catch (_err) { return; }
      if (!data || data.metagen_editor_clipboard !== 1 || !Array.isArray(data.nodes)) return;
      e.preventDefault();
      clipboard = { nodes: data.nodes.filter((n) => n && typeof n.id === "string" && typeof n.kind === "string"),
        edges: Array.isArray(data.edges) ? data.edges : [] };
      this.paste(this._pastePoint());
    }

    /** Paste the clipboard with fresh ids at `at` (top-left; null = beside the originals); `exact` keeps the
     * copied positions (Alt+drag duplicates). Returns the new ids, in clipboard order. */
    paste(at, exact) {
      if (!clipboard || !clipboard.nodes.length) return [];
      const nodes = clone(clipboard.nodes);
      for (const n of nodes) {
        n.x = Number.isFinite(n.x) ? n.x : 0;
        n.y = Number.isFinite(n.y) ? n.y : 0;
        n.params = n.params && typeof n.params === "object" ? n.params : {};
        n.model = n.model || null;
        if (n.section !== "inputs" && n.section !== "outputs") delete n.section;
        if (n.section && !NAME_RE.test(String(n.params.name || ""))) n.params.name = n.section === "inputs" ? "input" : "output";
      }
      const b = { x: Math.min(...nodes.map((n) => n.x)), y: Math.min(...nodes.map((n) => n.y)) };
      const target = exact ? b : at || { x: b.x + 40, y: b.y + 40 };
      const rename = new Map();
      const taken = this._takenIds();
      const names = { inputs: this._takenNames("inputs"), outputs: this._takenNames("outputs") };
      for (const n of nodes) {
        let id;
        if (n.section) {
          const name = uniqueName(n.params.name, names[n.section]);
          names[n.section].add(name);
          n.params.name = name;
          id = `${n.section}.${name}`;
        } else {
          id = uniqueName(n.id, taken);
          taken.add(id);
        }
        rename.set(n.id, id);
        n.id = id;
        n.x = Math.round(n.x - b.x + target.x);
        n.y = Math.round(n.y - b.y + target.y);
        n.raw = {};
        if (n.section === "outputs") n.kind = this.outputKind.kind;
        if (n.section === "inputs") n.kind = this.inputKind.kind;
      }
      if (!exact) this._shiftClear(nodes, [...rename.keys()]);
      const edges = clipboard.edges.filter((e) => e && rename.has(e.from) && rename.has(e.to))
        .map((e) => ({ from: rename.get(e.from), out: e.out, to: rename.get(e.to), in: e.in }));
      this.mutate("paste", () => {
        this.doc.nodes.push(...nodes);
        this.doc.edges.push(...edges);
      });
      this.selection = new Set(nodes.map((n) => n.id));
      this.selectedWire = null;
      this._applySelectionClasses();
      this._renderInspector();
      this._emitSelect();
      return nodes.map((n) => n.id);
    }

    /** Rename a node (or a workflow input/output); returns an error message or null. */
    renameNode(oldId, newId) {
      const n = this.node(oldId);
      if (!n) return "unknown node";
      if (n.section) return this.setParam(oldId, "name", newId);
      if (newId === oldId) return null;
      if (!ID_RE.test(newId)) return "an id must start with a letter or _ and use only letters, digits, _ and -";
      if (RESERVED_IDS.includes(newId)) return `"${newId}" is reserved`;
      if (this.node(newId)) return `another node is already called "${newId}"`;
      this.mutate("rename", () => this._renameIn(oldId, newId));
      return null;
    }

    _renameIn(oldId, newId) {
      const n = this.node(oldId);
      n.id = newId;
      for (const e of this.doc.edges) {
        if (e.from === oldId) e.from = newId;
        if (e.to === oldId) e.to = newId;
      }
      if (this.selection.has(oldId)) { this.selection.delete(oldId); this.selection.add(newId); }
      if (this.runState[oldId]) { this.runState[newId] = this.runState[oldId]; delete this.runState[oldId]; }
      const el = this.nodeEls.get(oldId);
      if (el) {
        this.nodeEls.delete(oldId); this.nodeEls.set(newId, el); el._nodeId = newId; el._sig = null;
        this.geom.set(newId, this.geom.get(oldId)); this.geom.delete(oldId);
      }
    }

    /** Set (value !== undefined) or reset (undefined) a param; returns an error message or null. */
    setParam(id, name, value, coalesce) {
      const n = this.node(id);
      if (!n) return "unknown node";
      if (n.section && name === "name") {
        const newName = String(value || "");
        if (newName === n.params.name) return null;
        if (!NAME_RE.test(newName)) return "a name must start with a letter or _ and use only letters, digits and _";
        if (this._takenNames(n.section).has(newName)) return `another ${n.section === "inputs" ? "input" : "output"} is called "${newName}"`;
        this.mutate("rename", () => {
          n.params.name = newName;
          this._renameIn(id, `${n.section}.${newName}`);
        }, coalesce);
        this._emitSelect();
        return null;
      }
      const def = this.kindDef(n.kind);
      const param = this._paramsOf(def).find((p) => p.name === name);
      this.mutate(`edit ${name}`, () => {
        n.params = n.params || {};
        if (value === undefined || (param && !n.section && equal(value, param.default))) delete n.params[name];
        else n.params[name] = value;
        if (n.section === "inputs" && name === "type") {
          const d = n.params.default;
          if (value === "number" && d !== undefined && typeof d !== "number") {
            const num = Number(d);
            if (typeof d === "string" && d.trim() !== "" && Number.isFinite(num)) n.params.default = num;
            else delete n.params.default;
          }
          this._dropIncompatibleFrom(n.id);
        }
      }, coalesce);
      return null;
    }

    _dropIncompatibleFrom(id) {
      const n = this.node(id);
      const type = this.outputPorts(n)[0].type;
      const before = this.doc.edges.length;
      this.doc.edges = this.doc.edges.filter((e) => {
        if (e.from !== id) return true;
        const dst = this.node(e.to);
        const dp = dst && this.inputPorts(dst).find((p) => p.name === e.in);
        return !dp || portCompatible(type, dp.type);
      });
      if (this.doc.edges.length < before) this.message(`removed wires that do not accept ${type}`, "warning");
    }

    setModel(id, model) {
      const n = this.node(id);
      if (!n) return;
      this.mutate("model", () => { n.model = model || null; });
    }

    setMeta(key, value, coalesce) {
      this.mutate(`edit ${key}`, () => { this.doc.meta[key] = value; }, coalesce);
    }

    // ---------------------------------------------------------------- layout

    /** Positions for `nodes`: each connected component laid out in layers, components packed in rows. */
    _layeredPositions(nodes) {
      const ids = new Set(nodes.map((n) => n.id));
      const parent = new Map(nodes.map((n) => [n.id, n.id]));
      const find = (x) => { while (parent.get(x) !== x) { parent.set(x, parent.get(parent.get(x))); x = parent.get(x); } return x; };
      for (const e of this.doc.edges) if (ids.has(e.from) && ids.has(e.to)) parent.set(find(e.from), find(e.to));
      const comps = new Map();
      for (const n of nodes) {
        const r = find(n.id);
        if (!comps.has(r)) comps.set(r, []);
        comps.get(r).push(n);
      }
      if (comps.size === 1) return this._layeredComponent(nodes);
      const laid = [...comps.values()].map((members) => {
        const pos = this._layeredComponent(members);
        let w = 0; let hh = 0;
        for (const n of members) {
          const g = this.geom.get(n.id) || {};
          const p = pos.get(n.id);
          w = Math.max(w, p.x + (g.w || 220));
          hh = Math.max(hh, p.y + (g.h || 110));
        }
        return { pos, w, h: hh, size: members.length };
      });
      const area = laid.reduce((s, c) => s + (c.w + 80) * (c.h + 60), 0);
      const rowWidth = Math.max(Math.max(...laid.map((c) => c.w)), Math.sqrt(area) * 1.6);
      const out = new Map();
      let x = 0; let y = 0; let rowH = 0;
      // the biggest component first (the workflow), stray pieces after it
      laid.sort((a, b) => b.size - a.size);
      for (const c of laid) {
        if (x > 0 && x + c.w > rowWidth) { x = 0; y += rowH + 60; rowH = 0; }
        for (const [id, p] of c.pos) out.set(id, { x: p.x + x, y: p.y + y });
        x += c.w + 80;
        rowH = Math.max(rowH, c.h);
      }
      return out;
    }

    /** Layered (Sugiyama-style) layout: longest-path layers, barycentre ordering, measured sizes. */
    _layeredComponent(nodes) {
      const ids = nodes.map((n) => n.id);
      const idSet = new Set(ids);
      const preds = new Map(ids.map((id) => [id, []]));
      const succs = new Map(ids.map((id) => [id, []]));
      for (const e of this.doc.edges) {
        if (idSet.has(e.from) && idSet.has(e.to) && e.from !== e.to) {
          preds.get(e.to).push(e.from);
          succs.get(e.from).push(e.to);
        }
      }
      const layer = new Map();
      const visiting = new Set();
      const depth = (id) => {
        if (layer.has(id)) return layer.get(id);
        if (visiting.has(id)) return 0; // a cycle (invalid workflow): break it
        visiting.add(id);
        let d = 0;
        for (const p of preds.get(id)) d = Math.max(d, depth(p) + 1);
        visiting.delete(id);
        layer.set(id, d);
        return d;
      };
      ids.forEach(depth);
      const byId = new Map(nodes.map((n) => [n.id, n]));
      let maxLayer = Math.max(0, ...layer.values());
      // outputs go to the last column, inputs to the first
      for (const n of nodes) if (n.section === "outputs") maxLayer = Math.max(maxLayer, layer.get(n.id));
      for (const n of nodes) {
        if (n.section === "outputs") layer.set(n.id, maxLayer);
        if (n.section === "inputs") layer.set(n.id, 0);
      }
      // pull nodes towards their consumers where they have slack (keeps short wires)
      for (let i = 0; i < 2; i++) {
        for (const id of [...ids].sort((a, b) => layer.get(b) - layer.get(a))) {
          const n = byId.get(id);
          if (n.section || !succs.get(id).length) continue;
          const minSucc = Math.min(...succs.get(id).map((s) => layer.get(s)));
          if (minSucc - 1 > layer.get(id)) layer.set(id, minSucc - 1);
        }
      }
      const layers = [];
      for (const id of ids) {
        const l = layer.get(id);
        (layers[l] = layers[l] || []).push(id);
      }
      for (let l = 0; l < layers.length; l++) layers[l] = layers[l] || [];
      const order = new Map();
      layers.forEach((ls) => ls.forEach((id, i) => order.set(id, i)));
      const bary = (id, nbrs) => {
        const xs = nbrs.get(id).map((x) => order.get(x)).filter((x) => x !== undefined);
        return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : order.get(id);
      };
      for (let sweep = 0; sweep < 4; sweep++) {
        const down = sweep % 2 === 0;
        const seq = down ? layers.map((_, i) => i) : layers.map((_, i) => layers.length - 1 - i);
        for (const l of seq) {
          const nb = down ? preds : succs;
          layers[l].sort((a, b) => bary(a, nb) - bary(b, nb));
          layers[l].forEach((id, i) => order.set(id, i));
        }
      }
      const gapX = 80;
      const gapY = 36;
      const pos = new Map();
      let x = 0;
      const heights = layers.map((ls) => ls.reduce((s, id) => s + ((this.geom.get(id) || {}).h || 110) + gapY, -gapY));
      const tallest = Math.max(0, ...heights);
      layers.forEach((ls, l) => {
        const width = Math.max(180, ...ls.map((id) => (this.geom.get(id) || {}).w || 220));
        let y = (tallest - heights[l]) / 2;
        for (const id of ls) {
          pos.set(id, { x, y: Math.round(y) });
          y += ((this.geom.get(id) || {}).h || 110) + gapY;
        }
        x += width + gapX;
      });
      return pos;
    }

    autoLayout() {
      if (!this.doc.nodes.length) return;
      this._ensureMeasured();
      const pos = this._layeredPositions(this.doc.nodes);
      this.mutate("auto-layout", () => {
        for (const n of this.doc.nodes) { const p = pos.get(n.id); n.x = p.x; n.y = p.y; }
      });
      this.fitView();
    }

    _ensureMeasured() {
      // nodes need real sizes for a good layout; render them first (positions may still be unset)
      for (const n of this.doc.nodes) if (n.x === null || n.x === undefined) { n.x = 0; n.y = 0; n._unplaced = true; }
      this.render();
    }

    _placeMissing() {
      const missing = this.doc.nodes.filter((n) => n.x === null || n.x === undefined);
      if (!missing.length) return;
      this._ensureMeasured();
      const placed = this.doc.nodes.filter((n) => !n._unplaced);
      const pos = this._layeredPositions(placed.length ? missing : this.doc.nodes);
      const b = placed.length ? this._bounds(new Set(placed.map((n) => n.id))) : null;
      for (const n of missing) {
        const p = pos.get(n.id);
        n.x = p.x + (b ? b.x0 : 0);
        n.y = p.y + (b ? b.y1 + 60 : 0);
        delete n._unplaced;
      }
    }

    // ---------------------------------------------------------------- pointer interaction

    _onPointerDown(e) {
      if (this.drag) return;
      this.root.focus({ preventScroll: true });
      if (!this.quick.hidden && !this.quick.contains(e.target)) this.closeQuickAdd();
      const target = e.target;
      if (target.closest(".mge-global-issues, .mge-toast")) return;
      const portEl = target.closest("[data-port]");
      const nodeEl = target.closest(".mge-node");
      const wireEl = target.closest(".mge-wire-group");
      const panGesture = e.button === 1 || (e.button === 0 && this.spaceDown);
      if (panGesture || (e.button === 0 && !nodeEl && !wireEl && !e.shiftKey && !e.ctrlKey && !e.metaKey)) {
        if (this.spaceDown) this.spaceUsed = true;
        this._startDrag(e, { type: "pan", sx: e.clientX, sy: e.clientY, vx: this.view.x, vy: this.view.y, moved: false });
        return;
      }
      if (e.button !== 0) return;
      e.preventDefault();
      if (portEl && nodeEl) {
        this._startWireDrag(e, nodeEl._nodeId, portEl.getAttribute("data-port"));
        return;
      }
      if (nodeEl) {
        const id = nodeEl._nodeId;
        if (e.shiftKey || e.ctrlKey || e.metaKey) {
          if (this.selection.has(id)) this.selection.delete(id); else this.selection.add(id);
        } else if (!this.selection.has(id)) {
          this.selection = new Set([id]);
        }
        this.selectedWire = null;
        this._applySelectionClasses();
        this._renderInspector();
        this._emitSelect();
        if (!this.selection.has(id)) return;
        let dragId = id;
        if (e.altKey) {
          // Alt+drag: drag a copy, leave the originals where they are
          const originals = this.doc.nodes.filter((n) => this.selection.has(n.id)).map((n) => n.id);
          const saved = clipboard;
          this.copySelection(true);
          const copies = this.paste(null, true);
          clipboard = saved;
          dragId = copies[originals.indexOf(id)] || id;
        }
        const start = new Map([...this.selection].map((sid) => { const n = this.node(sid); return [sid, { x: n.x, y: n.y }]; }));
        this._startDrag(e, { type: "move", sx: e.clientX, sy: e.clientY, start, before: this._snapshot(), moved: false,
          clickId: dragId, additive: e.shiftKey || e.ctrlKey || e.metaKey });
        return;
      }
      if (wireEl) {
        this.selectedWire = wireEl.getAttribute("data-wire");
        this.selection.clear();
        this._applySelectionClasses();
        this._renderInspector();
        this._emitSelect();
        return;
      }
      // Shift/Ctrl + drag on the background: rubber band
      const p = this.toWorld(e.clientX, e.clientY);
      this._startDrag(e, { type: "band", sx: e.clientX, sy: e.clientY, wx: p.x, wy: p.y,
        base: new Set(this.selection), moved: false });
    }

    _startDrag(e, drag) {
      this.drag = drag;
      drag.pointerId = e.pointerId;
      try { this.viewport.setPointerCapture(e.pointerId); } catch (_err) { /* synthetic events */ }
      this.viewport.classList.add(`mge-dragging-${drag.type}`);
    }

    _startWireDrag(e, nodeId, portKey) {
      const [dir, port] = [portKey.slice(0, portKey.indexOf(":")), portKey.slice(portKey.indexOf(":") + 1)];
      let drag;
      if (dir === "out") {
        drag = { type: "wire", from: nodeId, out: port, anchor: this._portPos(nodeId, portKey), reverse: false };
      } else {
        const existing = this.doc.edges.find((e2) => e2.to === nodeId && e2.in === port);
        if (existing) {
          // pick up the wire: drop it elsewhere to re-route, on empty canvas to disconnect
          drag = { type: "wire", from: existing.from, out: existing.out, anchor: this._portPos(existing.from, `out:${existing.out}`),
            reverse: false, detached: this._edgeKey(existing), before: this._snapshot() };
          this.doc.edges = this.doc.edges.filter((x) => x !== existing);
          this._renderWires();
          this.render();
        } else {
          drag = { type: "wire", to: nodeId, in: port, anchor: this._portPos(nodeId, portKey), reverse: true };
        }
      }
      this._startDrag(e, drag);
      this._updateTempWire(e.clientX, e.clientY);
      this._highlightTargets(drag);
    }

    /** Mark the ports the dragged wire may be dropped on. */
    _highlightTargets(drag) {
      // the rules of checkConnection, computed once for the whole canvas: the nodes a wire from `from`
      // may not enter (itself and its ancestors), or that may not feed `to` (itself and its descendants)
      const anchor = drag.reverse ? drag.to : drag.from;
      const next = new Map();
      for (const e of this.doc.edges) {
        const [a, b] = drag.reverse ? [e.from, e.to] : [e.to, e.from];
        if (!next.has(a)) next.set(a, []);
        next.get(a).push(b);
      }
      const blocked = new Set([anchor]);
      const stack = [anchor];
      while (stack.length) for (const n of next.get(stack.pop()) || []) if (!blocked.has(n)) { blocked.add(n); stack.push(n); }
      const anchorNode = this.node(anchor);
      const ports = anchorNode ? (drag.reverse ? this.inputPorts(anchorNode) : this.outputPorts(anchorNode)) : [];
      const own = ports.find((p) => p.name === (drag.reverse ? drag.in : drag.out));
      const ownType = own ? own.type : "any";
      const want = drag.reverse ? "out:" : "in:";
      for (const [id, el] of this.nodeEls) {
        const free = !blocked.has(id);
        for (const portEl of el.querySelectorAll("[data-port]")) {
          const key = portEl.getAttribute("data-port");
          const type = portEl.getAttribute("data-type") || "any";
          const ok = free && key.startsWith(want) &&
            (drag.reverse ? portCompatible(type, ownType) : portCompatible(ownType, type));
          portEl.classList.toggle("mge-target-ok", ok);
        }
      }
      this.root.classList.add("mge-wiring");
    }

    _buildAdjacency() {
      const succ = new Map();
      for (const e of this.doc.edges) {
        if (!succ.has(e.from)) succ.set(e.from, []);
        succ.get(e.from).push(e.to);
      }
      return succ;
    }

    _clearTargets() {
      this.root.classList.remove("mge-wiring");
      for (const el of this.root.querySelectorAll(".mge-target-ok")) el.classList.remove("mge-target-ok");
    }

    _updateTempWire(clientX, clientY) {
      const d = this.drag;
      const p = this.toWorld(clientX, clientY);
      this.tempWire.setAttribute("d", d.reverse ? this._wirePath(p, d.anchor) : this._wirePath(d.anchor, p));
    }

    /** While a node, wire or band drag is near the canvas edge, keep panning towards it. */
    _autoPan(e) {
      const d = this.drag;
      if (!d || d.type === "pan") return;
      const r = this.viewport.getBoundingClientRect();
      const edge = 28;
      const speed = (dist) => (dist < edge ? Math.ceil((edge - dist) / 3) : 0);
      d.autoPan = { dx: speed(e.clientX - r.left) - speed(r.right - e.clientX),
        dy: speed(e.clientY - r.top) - speed(r.bottom - e.clientY), e };
      if ((d.autoPan.dx || d.autoPan.dy) && !d.autoPanTimer) {
        const step = () => {
          const cur = this.drag;
          if (cur !== d || !d.autoPan || (!d.autoPan.dx && !d.autoPan.dy)) { d.autoPanTimer = null; return; }
          this.view.x += d.autoPan.dx;
          this.view.y += d.autoPan.dy;
          if (d.type === "move") { d.sx += d.autoPan.dx; d.sy += d.autoPan.dy; }
          if (d.type === "band") { d.sx += d.autoPan.dx; d.sy += d.autoPan.dy; }
          this._applyView();
          this._dragTo(d.autoPan.e);
          d.autoPanTimer = setTimeout(step, 16);
        };
        d.autoPanTimer = setTimeout(step, 16);
      }
    }

    _onPointerMove(e) {
      this.mouse.x = e.clientX;
      this.mouse.y = e.clientY;
      const d = this.drag;
      if (!d || e.pointerId !== d.pointerId) return;
      this._autoPan(e);
      this._dragTo(e);
    }

    _dragTo(e) {
      const d = this.drag;
      if (!d) return;
      if (d.type === "pan") {
        d.moved = d.moved || Math.hypot(e.clientX - d.sx, e.clientY - d.sy) > 3;
        this.view.x = d.vx + (e.clientX - d.sx);
        this.view.y = d.vy + (e.clientY - d.sy);
        this._applyView();
      } else if (d.type === "move") {
        const dx = (e.clientX - d.sx) / this.view.z;
        const dy = (e.clientY - d.sy) / this.view.z;
        if (!d.moved && Math.hypot(e.clientX - d.sx, e.clientY - d.sy) < 3) return;
        d.moved = true;
        for (const [id, s] of d.start) {
          const n = this.node(id);
          n.x = Math.round(s.x + dx);
          n.y = Math.round(s.y + dy);
          const el = this.nodeEls.get(id);
          if (el) { el._transform = `translate(${n.x}px, ${n.y}px)`; el.style.transform = el._transform; }
        }
        this._renderWires(new Set(d.start.keys()));
        this._scheduleMinimap();
      } else if (d.type === "wire") {
        this._updateTempWire(e.clientX, e.clientY);
      } else if (d.type === "band") {
        d.moved = true;
        const p = this.toWorld(e.clientX, e.clientY);
        const r = this.viewport.getBoundingClientRect();
        const x0 = Math.min(d.sx, e.clientX) - r.left; const y0 = Math.min(d.sy, e.clientY) - r.top;
        Object.assign(this.band.style, { left: `${x0}px`, top: `${y0}px`,
          width: `${Math.abs(e.clientX - d.sx)}px`, height: `${Math.abs(e.clientY - d.sy)}px` });
        this.band.hidden = false;
        const bx0 = Math.min(d.wx, p.x); const bx1 = Math.max(d.wx, p.x);
        const by0 = Math.min(d.wy, p.y); const by1 = Math.max(d.wy, p.y);
        const sel = new Set(d.base);
        for (const n of this.doc.nodes) {
          const g = this.geom.get(n.id) || { w: 200, h: 100 };
          if (n.x < bx1 && n.x + g.w > bx0 && n.y < by1 && n.y + g.h > by0) sel.add(n.id);
        }
        this.selection = sel;
        this._applySelectionClasses();
      }
    }

    _onPointerUp(e) {
      const d = this.drag;
      if (!d || e.pointerId !== d.pointerId) return;
      this.drag = null;
      try { this.viewport.releasePointerCapture(e.pointerId); } catch (_err) { /* already released */ }
      this.viewport.classList.remove(`mge-dragging-${d.type}`);
      if (d.type === "pan") {
        if (!d.moved && e.button === 0 && !this.spaceDown) {
          // a click on the background clears the selection
          if (this.selection.size || this.selectedWire) {
            this.selection.clear();
            this.selectedWire = null;
            this._applySelectionClasses();
            this._renderInspector();
            this._emitSelect();
          }
        }
      } else if (d.type === "move") {
        if (d.moved) {
          if (d.before !== this._snapshot()) { this._pushUndo(d.before, "move"); this.coalesceKey = null; this._notifyChange(); }
          this.render();
        } else {
          if (!d.additive && this.selection.size > 1) {
            this.selection = new Set([d.clickId]);
            this._applySelectionClasses();
            this._renderInspector();
            this._emitSelect();
          }
          if (this.selection.size === 1) this._reveal(d.clickId);
        }
      } else if (d.type === "wire") {
        this.tempWire.setAttribute("d", "");
        this._clearTargets();
        this._finishWire(d, e);
      } else if (d.type === "band") {
        this.band.hidden = true;
        this._renderInspector();
        this._emitSelect();
      }
    }

    _finishWire(d, e) {
      const hit = document.elementFromPoint(e.clientX, e.clientY);
      const portEl = hit && hit.closest && hit.closest("[data-port]");
      const nodeEl = portEl && portEl.closest(".mge-node");
      const restore = () => {
        if (d.detached) { this.doc = JSON.parse(d.before); this.render(); }
      };
      if (!portEl || !nodeEl || !this.root.contains(nodeEl)) {
        const onCanvas = hit && this.viewport.contains(hit) && !hit.closest(".mge-node, .mge-global-issues, .mge-toast");
        if (!d.detached && onCanvas) {
          const type = d.reverse ? (this.inputPorts(this.node(d.to)).find((p) => p.name === d.in) || {}).type
            : (this.outputPorts(this.node(d.from)).find((p) => p.name === d.out) || {}).type;
          this.openQuickAdd(e.clientX, e.clientY, d.reverse ? { to: d.to, in: d.in, type: type || "any" }
            : { from: d.from, out: d.out, type: type || "any" });
          return;
        }
        if (d.detached) {
          // dropped on nothing: the wire is removed (one undoable step)
          const now = this._snapshot();
          this.doc = JSON.parse(d.before);
          this.mutate("disconnect", () => { this.doc = JSON.parse(now); });
          this.render();
        }
        return;
      }
      const key = portEl.getAttribute("data-port");
      const dir = key.slice(0, key.indexOf(":"));
      let port = key.slice(key.indexOf(":") + 1);
      const id = nodeEl._nodeId;
      if (!d.reverse && dir === "in") {
        if (d.detached) restore();
        if (d.detached && `${d.from}.${d.out}->${id}.${port}` === d.detached) return;
        if (d.detached) {
          const problem = this.checkConnection(d.from, d.out, id, port);
          if (problem) { this.message(problem, "error"); return; }
          const detached = d.detached;
          if (port === ADD_PORT) port = this._newPortName(d.from, d.out, id);
          this.mutate("reconnect", () => {
            this.doc.edges = this.doc.edges.filter((x) => this._edgeKey(x) !== detached);
            const i = this.doc.edges.findIndex((x) => x.to === id && x.in === port);
            const edge = { from: d.from, out: d.out, to: id, in: port };
            if (i >= 0) this.doc.edges[i] = edge; else this.doc.edges.push(edge);
          });
          return;
        }
        this.connect(d.from, d.out, id, port);
      } else if (d.reverse && dir === "out") {
        this.connect(id, port, d.to, d.in);
      } else {
        restore();
        if (!(d.reverse ? d.to === id : d.from === id)) {
          this.message(d.reverse ? "drop the wire on an output port (right side of a node)"
            : "drop the wire on an input port (left side of a node)", "warning");
        }
      }
    }

    _onDblClick(e) {
      // pointer capture during the clicks retargets dblclick to the viewport: look at what is under the pointer
      const under = (e.clientX !== undefined && document.elementFromPoint(e.clientX, e.clientY)) || e.target;
      const target = this.root.contains(under) ? under : e.target;
      const nodeEl = target.closest(".mge-node");
      if (nodeEl && !target.closest("[data-port]")) {
        // double-click a node: rename it in the inspector
        e.preventDefault();
        this.select(nodeEl._nodeId);
        this._emitSelect();
        const field = this.inspector.querySelector('[data-testid="inspector-id"]');
        if (field) { this.togglePanel("inspector", true); field.focus(); field.select(); }
        return;
      }
      if (target.closest(".mge-node, .mge-wire-group, .mge-global-issues, .mge-toast")) return;
      e.preventDefault();
      this.openQuickAdd(e.clientX, e.clientY);
    }

    /** Right-click menu: node actions on a node, wire actions on a wire, canvas actions elsewhere. */
    _onContextMenu(e) {
      e.preventDefault();
      if (this.drag) return;
      const nodeEl = e.target.closest(".mge-node");
      const wireEl = e.target.closest(".mge-wire-group");
      const at = this.toWorld(e.clientX, e.clientY);
      let items;
      if (nodeEl) {
        const id = nodeEl._nodeId;
        if (!this.selection.has(id)) this.select(id);
        this._emitSelect();
        const many = this.selection.size > 1;
        items = [
          ["rename", "Rename…", !many, () => this._onDblClick({ target: nodeEl, preventDefault() {} })],
          ["duplicate", many ? "Duplicate nodes" : "Duplicate", true, () => { if (this.copySelection()) this.paste(); }],
          ["copy", "Copy", true, () => this.copySelection()],
          ["disconnect", "Disconnect all wires", this.doc.edges.some((x) => this.selection.has(x.from) || this.selection.has(x.to)),
            () => {
              const ids = new Set(this.selection);
              this.mutate("disconnect", () => { this.doc.edges = this.doc.edges.filter((x) => !ids.has(x.from) && !ids.has(x.to)); });
            }],
          ["delete", many ? "Delete nodes" : "Delete", true, () => this.deleteSelection()],
        ];
      } else if (wireEl) {
        const key = wireEl.getAttribute("data-wire");
        items = [["disconnect", "Delete wire", true, () => this.disconnect(key)]];
      } else {
        items = [
          ["add", "Add node here…", true, () => this.openQuickAdd(e.clientX, e.clientY)],
          ["paste", "Paste", Boolean(clipboard), () => this.paste(at)],
          ["select-all", "Select all", this.doc.nodes.length > 0, () => { this.select(this.doc.nodes.map((n) => n.id)); this._emitSelect(); }],
          ["layout", "Auto-layout", this.doc.nodes.length > 0, () => this.autoLayout()],
          ["fit", "Fit to view", true, () => this.fitView()],
        ];
      }
      this._showMenu(e.clientX, e.clientY, items);
    }

    _showMenu(clientX, clientY, items) {
      this._closeMenu();
      const menu = h("div", { class: "mge-menu", role: "menu", "data-testid": "context-menu" });
      for (const [action, label, enabled, fn] of items) {
        menu.appendChild(h("button", {
          type: "button", class: "mge-menu-item", role: "menuitem", "data-action": action, disabled: !enabled,
          onpointerdown: (ev) => ev.stopPropagation(),
          onclick: (ev) => { ev.preventDefault(); this._closeMenu(); fn(); },
        }, label));
      }
      const rr = this.root.getBoundingClientRect();
      this.root.appendChild(menu);
      menu.style.left = `${clamp(clientX - rr.left, 2, Math.max(2, rr.width - menu.offsetWidth - 2))}px`;
      menu.style.top = `${clamp(clientY - rr.top, 2, Math.max(2, rr.height - menu.offsetHeight - 2))}px`;
      this.menu = menu;
      this._menuAway = (ev) => { if (!menu.contains(ev.target)) this._closeMenu(); };
      document.addEventListener("pointerdown", this._menuAway, true);
    }

    _closeMenu() {
      if (!this.menu) return;
      this.menu.remove();
      this.menu = null;
      document.removeEventListener("pointerdown", this._menuAway, true);
    }

    _onWheel(e) {
      if (e.target.closest(".mge-preview") && !e.ctrlKey) return;
      e.preventDefault();
      const delta = e.deltaMode === 1 ? e.deltaY * 16 : e.deltaY;
      this._zoomAt(Math.exp(-delta * 0.0015), e.clientX, e.clientY);
    }

    // ---------------------------------------------------------------- keyboard

    _onKeyDown(e) {
      if (isTyping(e.target)) return;
      const mod = e.ctrlKey || e.metaKey;
      const key = e.key;
      if (key === " " && !mod) {
        e.preventDefault();
        if (!e.repeat) { this.spaceDown = true; this.spaceUsed = false; this.viewport.classList.add("mge-space"); }
        return;
      }
      if (mod && (key === "z" || key === "Z") && !e.shiftKey) { e.preventDefault(); this.undo(); return; }
      if (mod && ((key === "z" || key === "Z") && e.shiftKey || key === "y" || key === "Y")) {
        e.preventDefault(); this.redo(); return;
      }
      // copy: the internal clipboard, and (via the copy event that follows) the system one for other tabs
      if (mod && (key === "c" || key === "C")) { this.copySelection(); return; }
      if (mod && (key === "x" || key === "X")) {
        if (this.copySelection()) { e.preventDefault(); this.deleteSelection(); }
        return;
      }
      if (mod && (key === "v" || key === "V")) {
        if (!clipboard) return; // let the paste event bring nodes copied in another tab
        e.preventDefault();
        this.paste(this._pastePoint());
        return;
      }
      if (mod && (key === "a" || key === "A")) {
        e.preventDefault();
        this.selection = new Set(this.doc.nodes.map((n) => n.id));
        this._applySelectionClasses(); this._renderInspector(); this._emitSelect();
        return;
      }
      if (mod && key === "d") { e.preventDefault(); if (this.copySelection()) this.paste(); return; }
      if (mod) return;
      if (key === "Delete" || key === "Backspace") { e.preventDefault(); this.deleteSelection(); return; }
      if (key === "/") { e.preventDefault(); this.openQuickAdd(); return; }
      if (key === "f" || key === "F") {
        e.preventDefault();
        this.fitView(e.shiftKey && this.selection.size ? [...this.selection] : null);
        return;
      }
      if (key === "Escape") {
        this.selection.clear(); this.selectedWire = null;
        this._applySelectionClasses(); this._renderInspector(); this._emitSelect();
      }
    }

    _onKeyUp(e) {
      if (e.key !== " ") return;
      const wasDown = this.spaceDown;
      this.spaceDown = false;
      this.viewport.classList.remove("mge-space");
      if (isTyping(e.target) || !wasDown) return;
      e.preventDefault();
      if (!this.spaceUsed) this.openQuickAdd();
    }

    // ---------------------------------------------------------------- quick add

    /** The quick-add search at a client point (default: the mouse); `pending` = a dropped wire to attach. */
    openQuickAdd(clientX, clientY, pending) {
      const r = this.viewport.getBoundingClientRect();
      if (clientX === undefined) {
        const inside = this.mouse.inside;
        clientX = inside ? this.mouse.x : r.left + r.width / 2 - 140;
        clientY = inside ? this.mouse.y : r.top + 60;
      }
      this.quickAt = this.toWorld(clientX, clientY);
      const rootRect = this.root.getBoundingClientRect();
      const left = clamp(clientX - rootRect.left, 4, Math.max(4, rootRect.width - 300));
      const top = clamp(clientY - rootRect.top, 4, Math.max(4, rootRect.height - 320));
      this.quick.style.left = `${left}px`;
      this.quick.style.top = `${top}px`;
      this.quick.textContent = "";
      const input = h("input", { type: "text", class: "mge-input", placeholder: "Add node: type to search\u2026",
        "data-testid": "quickadd-input", "aria-label": "Search node kinds" });
      const list = h("div", { class: "mge-quick-list", role: "listbox" });
      if (pending) {
        const what = pending.from ? `${pending.from}.${pending.out}` : `${pending.to}.${pending.in}`;
        this.quick.append(h("div", { class: "mge-muted mge-quick-head" },
          `${pending.from ? "Connect from" : "Connect to"} ${what} (${pending.type})`));
      }
      this.quick.append(input, list);
      this.quick.hidden = false;
      let active = 0;
      let items = [];
      const refresh = () => {
        const q = input.value.trim();
        items = [...this.kinds.values()]
          .filter((d) => this._matches(d, q) && (!pending || this._wirePlan(d, pending)))
          .map((d, i) => [this._rank(d, q), i, d]).sort((a, b) => a[0] - b[0] || a[1] - b[1]).map((x) => x[2]);
        active = clamp(active, 0, Math.max(0, items.length - 1));
        list.textContent = "";
        items.forEach((def, i) => {
          list.appendChild(h("div", {
            class: `mge-quick-item${i === active ? " mge-active" : ""}`, "data-kind": def.kind, role: "option",
            title: def.description || "",
            onpointerdown: (ev) => { ev.preventDefault(); ev.stopPropagation(); choose(def.kind); },
          }, [h("span", { class: `mge-swatch mge-cat-${def.category || "other"}` }), h("b", {}, def.title || def.kind),
            h("span", { class: "mge-item-kind" }, ` ${def.kind} \u00b7 ${def.category || ""}`),
            h("div", { class: "mge-quick-desc" }, def.description || "")]));
        });
        if (!items.length) list.appendChild(h("div", { class: "mge-muted" }, "No node matches."));
        const act = list.children[active];
        if (act && act.scrollIntoView) act.scrollIntoView({ block: "nearest" });
      };
      const choose = (kind) => {
        const at = this.quickAt;
        this.closeQuickAdd();
        if (pending) this._addWired(kind, { x: at.x, y: at.y - 30 }, pending);
        else this.addNode(kind, { x: at.x, y: at.y });
        this.root.focus({ preventScroll: true });
      };
      input.addEventListener("input", () => { active = 0; refresh(); });
      input.addEventListener("keydown", (ev) => {
        if (ev.key === "ArrowDown") { ev.preventDefault(); active = Math.min(items.length - 1, active + 1); refresh(); }
        else if (ev.key === "ArrowUp") { ev.preventDefault(); active = Math.max(0, active - 1); refresh(); }
        else if (ev.key === "Enter") { ev.preventDefault(); if (items[active]) choose(items[active].kind); }
        else if (ev.key === "Escape") { ev.preventDefault(); this.closeQuickAdd(); this.root.focus({ preventScroll: true }); }
        ev.stopPropagation();
      });
      input.addEventListener("keyup", (ev) => ev.stopPropagation());
      refresh();
      input.focus({ preventScroll: true });
    }

    closeQuickAdd() { this.quick.hidden = true; this.quick.textContent = ""; }

    // ---------------------------------------------------------------- inspector

    _emitSelect() {
      const id = this.selection.size === 1 ? [...this.selection][0] : null;
      if (id === this._lastEmitted) return;
      this._lastEmitted = id;
      if (this.opts.onSelect) {
        try { this.opts.onSelect(id); } catch (err) { console.warn("metagen editor onSelect:", err); }
      }
    }

    /** Rebuild the inspector for the selection; `unlessTyping` skips it while a field of it has focus. */
    _renderInspector(unlessTyping) {
      this.root.classList.toggle("mge-nothing-selected", this.selection.size === 0);
      if (unlessTyping && this.inspector.contains(document.activeElement)) return;
      const box = this.inspector;
      box.textContent = "";
      if (this.selection.size > 1) {
        box.appendChild(h("div", { class: "mge-panel-title" }, `${this.selection.size} nodes selected`));
        box.appendChild(h("div", { class: "mge-muted" },
          "Drag to move them together; Ctrl+C / Ctrl+V copies, Delete removes."));
        return;
      }
      if (this.selection.size === 0) { this._renderWorkflowInspector(box); return; }
      const id = [...this.selection][0];
      const n = this.node(id);
      if (!n) return;
      const def = this.kindDef(n.kind);
      box.appendChild(h("div", { class: "mge-panel-title" },
        n.section === "inputs" ? "Workflow input" : n.section === "outputs" ? "Workflow output"
          : `${def ? def.title || def.kind : n.kind}`));
      if (def && def.description) box.appendChild(h("div", { class: "mge-desc" }, def.description));
      if (!def) box.appendChild(h("div", { class: "mge-field-error" }, `Unknown node kind "${n.kind}".`));
      const issues = this.issues.filter((i) => i && i.node_id === id);
      if (issues.length) {
        box.appendChild(h("div", { class: "mge-inspector-issues" }, issues.map((i) =>
          h("div", { class: `mge-global-issue mge-${i.severity || "error"}` }, [
            i.message || "", i.hint ? h("div", { class: "mge-issue-hint" }, `\u2192 ${i.hint}`) : null]))));
      }
      if (n.section) { this._renderIoInspector(box, n); return; }

      // id
      const idInput = h("input", { type: "text", class: "mge-input", value: n.id, "data-testid": "inspector-id",
        spellcheck: "false", "aria-label": "Node id" });
      const idErr = h("div", { class: "mge-field-error", "data-error-for": "id" });
      const applyId = () => {
        const cur = [...this.selection][0];
        const problem = this.renameNode(cur, idInput.value.trim());
        idErr.textContent = problem || "";
        idInput.classList.toggle("mge-invalid", Boolean(problem));
        if (!problem) this._emitSelect();
      };
      idInput.addEventListener("input", () => {
        const v = idInput.value.trim();
        const cur = [...this.selection][0];
        let problem = null;
        if (!ID_RE.test(v)) problem = "letters, digits, _ and - only; start with a letter or _";
        else if (RESERVED_IDS.includes(v)) problem = `"${v}" is reserved`;
        else if (v !== cur && this.node(v)) problem = `another node is called "${v}"`;
        idErr.textContent = problem || "";
        idInput.classList.toggle("mge-invalid", Boolean(problem));
      });
      idInput.addEventListener("change", applyId);
      idInput.addEventListener("keydown", (ev) => { if (ev.key === "Enter") { ev.preventDefault(); applyId(); } });
      box.appendChild(this._field("id", "Unique name of this node; wires refer to it.", idInput, idErr));

      if (def && def.uses_model) {
        const aliases = [...new Set([...(this.opts.models || []), ...Object.keys(this.doc.meta.models || {})])];
        if (n.model && !aliases.includes(n.model)) aliases.push(n.model);
        const sel = h("select", { class: "mge-input", "data-testid": "inspector-model", "data-param": "__model" },
          [h("option", { value: "" }, aliases.length ? `default (${aliases[0]})` : "default model")]
            .concat(aliases.map((a) => h("option", { value: a, selected: n.model === a }, a))));
        sel.addEventListener("change", () => this.setModel(id, sel.value));
        box.appendChild(this._field("model", "Which model this node uses.", sel));
      }
      if (!def) return;
      const resolved = this.resolvedParams(n);
      const fields = h("div", { class: "mge-fields" });
      box.appendChild(fields);
      const paint = () => {
        const res = this.resolvedParams(this.node(id) || n);
        for (const f of fields.children) {
          const p = f._param;
          if (p) f.hidden = !this._paramVisible(p, res);
        }
      };
      for (const p of this._paramsOf(def)) {
        const f = this._paramField(id, p, resolved[p.name], n.params && p.name in n.params, paint);
        f._param = p;
        fields.appendChild(f);
      }
      // validation issues about a param ("param 'n' must be ...") show under that field too
      for (const i of issues) {
        const m = /param '([^']+)'/.exec(i.message || "");
        const err = m && fields.querySelector(`[data-error-for="${CSS.escape(m[1])}"]`);
        if (err && !err.textContent) err.textContent = `${i.message}${i.hint ? ` \u2014 ${i.hint}` : ""}`;
      }
      paint();
    }

    _field(label, help, control, extra) {
      return h("label", { class: "mge-field" }, [
        h("span", { class: "mge-label", title: help || "" }, label), control,
        help ? h("span", { class: "mge-help" }, help) : null, extra || null,
      ]);
    }

    _paramField(id, p, value, isSet, repaint) {
      const err = h("div", { class: "mge-field-error", "data-error-for": p.name });
      const key = `param:${id}:${p.name}`;
      let control;
      let extra = null;
      const apply = (v, coalesce) => {
        this.setParam(id, p.name, v, coalesce);
        repaint();
        reset.hidden = !(this.node(id) && p.name in (this.node(id).params || {}));
      };
      const fail = (msg) => { err.textContent = msg || ""; control.classList.toggle("mge-invalid", Boolean(msg)); };
      const reset = h("button", { type: "button", class: "mge-reset", title: `Reset to default (${formatValue(p.default, 40)})`,
        "data-reset": p.name, hidden: !isSet }, "reset");
      const range = [p.min !== null && p.min !== undefined ? `\u2265 ${p.min}` : null,
        p.max !== null && p.max !== undefined ? `\u2264 ${p.max}` : null].filter(Boolean).join(", ");
      if (p.type === "int" || p.type === "float") {
        control = h("input", { type: "number", class: "mge-input", "data-param": p.name,
          value: value === null || value === undefined ? "" : String(value),
          min: p.min ?? undefined, max: p.max ?? undefined, step: p.type === "int" ? "1" : "any",
          placeholder: p.default === null || p.default === undefined ? "" : String(p.default) });
        control.addEventListener("input", () => {
          const raw = control.value.trim();
          if (control.validity && control.validity.badInput) { fail("not a number"); return; }
          if (raw === "") {
            if (p.required && (p.default === null || p.default === undefined)) { fail("required"); return; }
            fail(null); apply(undefined, key); return;
          }
          const num = Number(raw);
          if (!Number.isFinite(num) || (control.validity && control.validity.badInput)) { fail("not a number"); return; }
          if (p.type === "int" && !Number.isInteger(num)) { fail("must be a whole number"); return; }
          if (p.min !== null && p.min !== undefined && num < p.min) { fail(`must be \u2265 ${p.min}`); return; }
          if (p.max !== null && p.max !== undefined && num > p.max) { fail(`must be \u2264 ${p.max}`); return; }
          fail(null);
          apply(num, key);
        });
      } else if (p.type === "bool") {
        control = h("input", { type: "checkbox", class: "mge-check", "data-param": p.name, checked: Boolean(value) });
        control.addEventListener("change", () => apply(control.checked));
      } else if (p.type === "choice") {
        const choices = (p.choices || []).slice();
        if (value !== null && value !== undefined && !choices.includes(value)) choices.push(value);
        control = h("select", { class: "mge-input", "data-param": p.name },
          (p.default === null || p.default === undefined ? [h("option", { value: "" }, "\u2014")] : [])
            .concat(choices.map((c) => h("option", { value: c, selected: c === value }, c))));
        control.addEventListener("change", () => apply(control.value === "" ? undefined : control.value));
      } else if (p.type === "text") {
        control = h("textarea", { class: "mge-input mge-text", "data-param": p.name, rows: "5", spellcheck: "false" });
        control.value = value === null || value === undefined ? "" : String(value);
        const vars = h("div", { class: "mge-vars", "data-vars-for": p.name });
        const showVars = () => {
          vars.textContent = "";
          const names = templateVariables(control.value);
          vars.appendChild(h("span", { class: "mge-muted" }, names.length ? "uses " : "no {variables}"));
          const node = this.node(id);
          const def = node && this.kindDef(node.kind);
          const reserved = new Set((def && def.reserved_vars) || RESERVED_VARS);
          const wired = new Set(this.doc.edges.filter((x) => x.to === id).map((x) => x.in));
          for (const v of names) {
            const own = def && def.variadic_inputs && reserved.has(v) && !(def.inputs || []).some((q) => q.name === v);
            const state = own ? "own" : wired.has(v) ? "wired" : "unwired";
            vars.appendChild(h("span", { class: `mge-chip mge-chip-${state}`, "data-var": v, "data-var-state": state,
              title: state === "own" ? "filled in by the node itself" : state === "wired" ? "connected"
                : "not connected yet: wire an output into this input" }, `{${v}}`));
          }
        };
        showVars();
        control.addEventListener("input", () => {
          showVars();
          if (p.required && !control.value) { fail("required"); return; }
          fail(null);
          apply(control.value, key);
        });
        extra = vars;
      } else if (p.type === "list") {
        control = h("textarea", { class: "mge-input", "data-param": p.name, rows: "3", spellcheck: "false",
          placeholder: "one item per line" });
        control.value = Array.isArray(value) ? value.join("\n") : value === null || value === undefined ? "" : String(value);
        control.addEventListener("input", () => {
          const items = control.value.split("\n").map((s) => s.trim()).filter((s) => s !== "");
          apply(items.length ? items : [], key);
        });
      } else if (p.type === "json") {
        control = h("textarea", { class: "mge-input mge-mono", "data-param": p.name, rows: "3", spellcheck: "false",
          placeholder: "JSON, e.g. {\"regex\": \"Answer: (\\\\d+)\"}" });
        control.value = value === null || value === undefined ? "" : JSON.stringify(value, null, 1);
        control.addEventListener("input", () => {
          const raw = control.value.trim();
          if (raw === "") { fail(null); apply(undefined, key); return; }
          try { const v = JSON.parse(raw); fail(null); apply(v, key); } catch (ex) { fail(`invalid JSON: ${ex.message}`); }
        });
      } else {
        control = h("input", { type: "text", class: "mge-input", "data-param": p.name,
          value: value === null || value === undefined ? "" : String(value) });
        control.addEventListener("input", () => {
          if (p.required && !control.value) { fail("required"); return; }
          fail(null); apply(control.value === "" && !p.required ? undefined : control.value, key);
        });
      }
      control.addEventListener("blur", () => { if (this.coalesceKey === key) this.coalesceKey = null; });
      reset.addEventListener("click", (ev) => {
        ev.preventDefault();
        this.setParam(id, p.name, undefined);
        this._renderInspector();
      });
      const label = h("span", { class: "mge-label", title: p.description || "" },
        [p.name, p.required ? h("span", { class: "mge-req" }, " *") : null,
          range ? h("span", { class: "mge-range" }, ` (${range})`) : null, reset]);
      const wrap = h("div", { class: `mge-field mge-field-${p.type}`, "data-field": p.name }, [
        label, p.type === "bool" ? h("label", { class: "mge-checkline" }, [control, " ", p.description || p.name]) : control,
        extra, p.description && p.type !== "bool" ? h("span", { class: "mge-help" }, p.description) : null, err]);
      return wrap;
    }

    _renderIoInspector(box, n) {
      const id = n.id;
      const nameInput = h("input", { type: "text", class: "mge-input", value: n.params.name, "data-param": "name",
        "data-testid": "inspector-id", spellcheck: "false" });
      const nameErr = h("div", { class: "mge-field-error", "data-error-for": "name" });
      const applyName = () => {
        const cur = [...this.selection][0] || id;
        const problem = this.setParam(cur, "name", nameInput.value.trim());
        nameErr.textContent = problem || "";
        nameInput.classList.toggle("mge-invalid", Boolean(problem));
      };
      nameInput.addEventListener("input", () => {
        const v = nameInput.value.trim();
        const cur = this.node([...this.selection][0] || id);
        let problem = null;
        if (!NAME_RE.test(v)) problem = "letters, digits and _ only; start with a letter or _";
        else if (cur && v !== cur.params.name && this._takenNames(cur.section).has(v)) problem = `"${v}" is taken`;
        nameErr.textContent = problem || "";
        nameInput.classList.toggle("mge-invalid", Boolean(problem));
      });
      nameInput.addEventListener("change", applyName);
      nameInput.addEventListener("keydown", (ev) => { if (ev.key === "Enter") { ev.preventDefault(); applyName(); } });
      box.appendChild(this._field("name", n.section === "inputs" ? "Referenced as inputs.<name>; in prompts as {name}."
        : "The name of this result.", nameInput, nameErr));
      if (n.section !== "inputs") return;
      const cur = () => this.node([...this.selection][0] || id);
      const typeSel = h("select", { class: "mge-input", "data-param": "type" },
        INPUT_TYPES.map((t) => h("option", { value: t, selected: (n.params.type || "text") === t }, t)));
      typeSel.addEventListener("change", () => {
        this.setParam(cur().id, "type", typeSel.value);
        this._renderInspector();
      });
      box.appendChild(this._field("type", "text, number or json", typeSel));
      const type = n.params.type || "text";
      const err = h("div", { class: "mge-field-error", "data-error-for": "default" });
      const dv = n.params.default;
      let control;
      const key = `default:${id}`;
      if (type === "number") {
        control = h("input", { type: "number", step: "any", class: "mge-input", "data-param": "default",
          value: dv === null || dv === undefined ? "" : String(dv) });
        control.addEventListener("input", () => {
          const raw = control.value.trim();
          if (raw === "") { err.textContent = ""; this.setParam(cur().id, "default", undefined, key); return; }
          const num = Number(raw);
          if (!Number.isFinite(num)) { err.textContent = "not a number"; control.classList.add("mge-invalid"); return; }
          err.textContent = ""; control.classList.remove("mge-invalid");
          this.setParam(cur().id, "default", num, key);
        });
      } else if (type === "json") {
        control = h("textarea", { class: "mge-input mge-mono", rows: "3", "data-param": "default" });
        control.value = dv === null || dv === undefined ? "" : JSON.stringify(dv, null, 1);
        control.addEventListener("input", () => {
          const raw = control.value.trim();
          if (raw === "") { err.textContent = ""; this.setParam(cur().id, "default", undefined, key); return; }
          try {
            const v = JSON.parse(raw);
            err.textContent = ""; control.classList.remove("mge-invalid");
            this.setParam(cur().id, "default", v, key);
          } catch (ex) { err.textContent = `invalid JSON: ${ex.message}`; control.classList.add("mge-invalid"); }
        });
      } else {
        control = h("textarea", { class: "mge-input", rows: "3", "data-param": "default" });
        control.value = dv === null || dv === undefined ? "" : String(dv);
        control.addEventListener("input", () => {
          this.setParam(cur().id, "default", control.value === "" ? undefined : control.value, key);
        });
      }
      control.addEventListener("blur", () => { if (this.coalesceKey === key) this.coalesceKey = null; });
      box.appendChild(this._field("default", "Used when the run form leaves it empty.", control, err));
      const desc = h("input", { type: "text", class: "mge-input", "data-param": "description",
        value: n.params.description || "" });
      desc.addEventListener("input", () => this.setParam(cur().id, "description", desc.value || undefined, `desc:${id}`));
      box.appendChild(this._field("description", "Shown next to the field in the run form.", desc));
    }

    _renderWorkflowInspector(box) {
      box.appendChild(h("div", { class: "mge-panel-title" }, "Workflow"));
      const name = h("input", { type: "text", class: "mge-input", value: this.doc.meta.name, "data-testid": "wf-name" });
      name.addEventListener("input", () => this.setMeta("name", name.value, "wf-name"));
      name.addEventListener("blur", () => { this.coalesceKey = null; });
      box.appendChild(this._field("name", "", name));
      const desc = h("textarea", { class: "mge-input", rows: "3", "data-testid": "wf-description" });
      desc.value = this.doc.meta.description || "";
      desc.addEventListener("input", () => this.setMeta("description", desc.value, "wf-desc"));
      desc.addEventListener("blur", () => { this.coalesceKey = null; });
      box.appendChild(this._field("description", "", desc));
      const counts = this.doc.nodes.reduce((acc, n) => { acc[n.section || "nodes"] += 1; return acc; },
        { inputs: 0, nodes: 0, outputs: 0 });
      const plural = (k, word) => `${k} ${word}${k === 1 ? "" : "s"}`;
      box.appendChild(h("div", { class: "mge-muted" }, `${plural(counts.nodes, "node")}, ${plural(counts.inputs, "input")}, ` +
        `${plural(counts.outputs, "output")}, ${plural(this.doc.edges.length, "wire")}.`));
      box.appendChild(h("div", { class: "mge-help-box" }, [
        h("div", {}, "Click a node to edit it. Drag from an output (right) to an input (left) to connect."),
        h("div", {}, "Double-click the canvas or press / to add a node. Shift+drag selects an area."),
        h("div", {}, "Ctrl+Z / Ctrl+Shift+Z undo and redo; Ctrl+C / Ctrl+V copy and paste; F fits the view."),
      ]));
    }
  }

  function mount(element, options) {
    if (!element) throw new Error("MetagenEditor.mount: no element given");
    return new Editor(element, options);
  }

  global.MetagenEditor = { mount, templateVariables, portCompatible, version: 1 };
})(typeof window !== "undefined" ? window : globalThis);
