/* Metagen Studio node-graph editor: canvas, palette, inspector, undo/redo; speaks workflow JSON.
 *
 * Plain browser JavaScript (ES modules), no build step, no dependencies. This is the entry module: it builds
 * `class Editor` from the method groups of the modules beside it and sets window.MetagenEditor. Pages load
 * static/editor.css and static/editor.js (which imports this module with its own ?v= query and resolves
 * window.MetagenEditorReady), then:
 *
 *   const MetagenEditor = await window.MetagenEditorReady;  // or listen for "metagen-editor-ready"
 *   const ed = MetagenEditor.mount(element, {
 *     schema,                      // NodeRegistry.schema(): [{kind,title,category,description,inputs,outputs,
 *                                  //   params,variadic_inputs,uses_model,section?}]; entries with
 *                                  //   section "inputs" / "outputs" are the workflow input / output pseudo-nodes
 *                                  //   (built-in fallbacks are used when the schema has none)
 *     rules,                       // required: nodes.registry.graph_rules() (node id pattern, reserved ids,
 *                                  //   template variable pattern, reserved variables, port compatibility)
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
 *   ed.setReadOnly(true | false);  // refuse every edit (a past version previewed; class mge-readonly)
 *   ed.setMarks({node_id: "added" | "removed" | "changed"});  // a diff drawn: classes mge-diff-*, data-diff
 *   ed.undo(); ed.redo(); ed.fitView(ids?); ed.autoLayout();
 *   ed.select(nodeId | [ids] | null);  ed.getSelection();  // programmatic selection (onSelect not fired)
 *   ed.setSchema(schema); ed.setRules(rules); ed.setModels(["main"]);
 *   ed.destroy();
 *   ed.setWorkflows({name: {inputs: [{name, type, required}], outputs: [{name, type}]}}); // also options.workflows:
 *                                  // the palette's Workflows section, and the ports of `kind: workflow` nodes
 *   await ed.makeSubworkflow(name?); // Ctrl+G / toolbar editor-make-subworkflow: the selection becomes a new
 *                                  // workflow, saved by options.onMakeSubworkflow(name, workflowJson) -> Promise,
 *                                  // and one workflow node replaces it (one undo step)
 *   options.onUndoSubworkflow(name): that step was undone (the host may offer to delete the file it wrote)
 *   options.onRedoSubworkflow(name): that step was redone (the host writes the file again if the undo deleted it)
 *   options.onOpenWorkflow(name, nodeId): double-click on a workflow node (the host opens the child, and keeps the
 *                                  // breadcrumb back)
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
 * fills itself: the rules' `reserved_vars`, or the schema entry's own `reserved_vars`), any extra wired
 * input, and a "+ input" port (data-port="in:+"): a wire dropped there becomes an input named after its source.
 *
 * Modules: helpers.js (constants, pure helpers), dom.js (element builders), rules.js (schema and graph
 * rules), document.js (document <-> workflow JSON), layout.js (auto-layout geometry) -- helpers, rules,
 * document and layout touch no DOM (tests.html runs their tests in a worker) -- and the method groups of
 * Editor: history.js, view.js, render.js, palette.js, edits.js, pointer.js, keyboard.js, quick_add.js,
 * inspector.js, subworkflow.js. MetagenEditor.templateVariables(text, rules?) and .portCompatible(source, target, rules?)
 * use the rules of the last mount (or setRules) when none are given.
 */

const V = new URL(import.meta.url).search; // this module's ?v=<version>, passed on to every import
const [helpers, dom, rules_, docs, ...methods] = await Promise.all([
  "helpers.js", "dom.js", "rules.js", "document.js",
  "history.js", "view.js", "render.js", "palette.js", "edits.js", "pointer.js", "keyboard.js", "quick_add.js",
  "inspector.js", "subworkflow.js",
].map((name) => import(`./${name}${V}`)));
const { stableStringify, mixin } = helpers;
const { h, svg, stackIcon } = dom;
const { compileRules, templateVariables: varsOf, portCompatible: compatible, readSchema, paramsOf, resolvedParams,
  paramVisible, inputPorts, outputPorts, RULES_REQUIRED } = rules_;
const { emptyDoc, docFromWorkflow, workflowFromDoc } = docs;

let lastRules = null; // the rules of the last mount / setRules, for the exported helpers

class Editor {
  constructor(element, options) {
    this.host = element;
    this.opts = Object.assign({ schema: [], models: [] }, options || {});
    this.rules = compileRules(this.opts.rules); // throws when missing: never a silent copy of the rules
    lastRules = this.rules;
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
    this.workflows = new Map(Object.entries(this.opts.workflows || {})); // sub-workflows: name -> their ports
    this._setSchema(this.opts.schema);
    this._build();
    this._renderPalette();
    this.render();
    this._renderInspector();
  }

  // ---------------------------------------------------------------- schema and rules (rules.js)

  _setSchema(schema) {
    const { kinds, inputKind, outputKind } = readSchema(schema);
    this.kinds = kinds;
    this.inputKind = inputKind;
    this.outputKind = outputKind;
  }

  kindDef(kind) { return this.kinds.get(kind) || null; }

  _paramsOf(def) { return paramsOf(def); }

  resolvedParams(node) { return resolvedParams(node, this.kindDef(node.kind)); }

  _paramVisible(param, resolved) { return paramVisible(param, resolved); }

  /** Input ports of a node: declared, template variables (variadic kinds), and any wired extras. */
  inputPorts(node) { return inputPorts(node, this.nodeDef(node), this.doc.edges, this.rules); }

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

  outputPorts(node) { return outputPorts(node, this.nodeDef(node), this.doc.edges); }

  // ---------------------------------------------------------------- document <-> workflow JSON (document.js)

  _emptyDoc() { return emptyDoc(); }

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
    const { doc, notes } = docFromWorkflow(wf, { inputKind: this.inputKind.kind, outputKind: this.outputKind.kind,
      rules: this.rules });
    this.loadNotes = notes;
    return doc;
  }

  _workflowFromDoc() { return workflowFromDoc(this.doc); }

  // ---------------------------------------------------------------- messages

  /** Tell the user something: onMessage, and a toast on the canvas. */
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
    this.childChanged = new Set(); // workflow nodes marked after their child changed (subworkflow.js)
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

  /** Replace the graph rules (nodes.registry.graph_rules()); nodes and the inspector are drawn again. */
  setRules(rules) {
    this.rules = compileRules(rules);
    lastRules = this.rules;
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

  /** Read-only (a past version previewed, a diff drawn): every edit is refused with a message. */
  setReadOnly(flag) {
    this.readOnly = !!flag;
    this.root.classList.toggle("mge-readonly", this.readOnly);
  }

  /** Diff marks by node id: "added" | "removed" | "changed" (classes mge-diff-*; removed nodes ghosted). */
  setMarks(marks) {
    this.marks = Object.assign({}, marks || {});
    this.render();
  }

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
      tb("make-subworkflow", [stackIcon(), " Sub-workflow"], "Make a sub-workflow of the selected nodes (Ctrl+G)",
        () => this.makeSubworkflow()),
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
      if (item && (e.key === "Enter" || e.key === " ")) { e.preventDefault(); this._addFromPalette(item, null); }
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
    if (window.ResizeObserver) {
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
}

mixin(Editor, ...methods.map((m) => m.default));

function rulesOrLast(rules) {
  if (rules) return compileRules(rules);
  if (!lastRules) throw new Error(`${RULES_REQUIRED}: pass the rules, or mount an editor first`);
  return lastRules;
}

/** The {variables} of a prompt template; `rules` defaults to those of the last mounted editor. */
export function templateVariables(text, rules) { return varsOf(text, rulesOrLast(rules)); }

/** Whether an output of type `source` may feed an input of type `target`; `rules` as for templateVariables. */
export function portCompatible(source, target, rules) { return compatible(source, target, rulesOrLast(rules)); }

export function mount(element, options) {
  if (!element) throw new Error("MetagenEditor.mount: no element given");
  if (!options || !options.rules) throw new Error(RULES_REQUIRED);
  return new Editor(element, options);
}

export { Editor };

export const MetagenEditor = { mount, templateVariables, portCompatible, version: 1 };
window.MetagenEditor = MetagenEditor;
window.dispatchEvent(new CustomEvent("metagen-editor-ready", { detail: MetagenEditor }));
