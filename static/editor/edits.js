/* Editing operations: add, connect, disconnect, delete, copy/paste, rename, params, auto-layout. */

const V = new URL(import.meta.url).search; // the entry's ?v=<version>: every module is fetched with it
const { shared, clone, equal, uniqueName } = await import(`./helpers.js${V}`);
const { isTyping } = await import(`./dom.js${V}`);
const { INPUT_TYPES, NAME_RE, ADD_PORT, portCompatible } = await import(`./rules.js${V}`);
const { layeredPositions } = await import(`./layout.js${V}`);

/** Methods of Editor (static/editor/index.js mixes them into its prototype). */
export default class EditMethods {
  _takenIds() { return new Set(this.doc.nodes.filter((n) => !n.section).map((n) => n.id).concat(this.rules.reservedIds)); }
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
    const visible = (r.width || 600) - this._coveredRight(true);  // the part of the canvas beside the inspector
    const c = this.toWorld(r.left + visible / 2, r.top + (r.height || 400) / 2);
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
    const dstDef = this.nodeDef(dst);
    const dp = inp === ADD_PORT && dstDef && dstDef.variadic_inputs && !dst.section ? { name: ADD_PORT, type: "any" }
      : this.inputPorts(dst).find((p) => p.name === inp);
    if (!sp || !dp) return `no such port ${!sp ? out : inp}`;
    if (from === to) return `cannot connect ${from} to itself`;
    if (!portCompatible(sp.type, dp.type, this.rules)) {
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
      const port = (def.inputs || []).find((p) => portCompatible(pending.type, p.type, this.rules));
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
    const port = (def.outputs || []).find((p) => portCompatible(p.type, pending.type, this.rules));
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
    shared.clipboard = {
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
    const sel = window.getSelection && window.getSelection();
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
    shared.clipboard = { nodes: data.nodes.filter((n) => n && typeof n.id === "string" && typeof n.kind === "string"),
      edges: Array.isArray(data.edges) ? data.edges : [] };
    this.paste(this._pastePoint());
  }

  /** Paste the clipboard with fresh ids at `at` (top-left; null = beside the originals); `exact` keeps the
   * copied positions (Alt+drag duplicates). Returns the new ids, in clipboard order. */
  paste(at, exact) {
    if (!shared.clipboard || !shared.clipboard.nodes.length) return [];
    const nodes = clone(shared.clipboard.nodes);
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
    const edges = shared.clipboard.edges.filter((e) => e && rename.has(e.from) && rename.has(e.to))
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
    if (!this.rules.nodeId.test(newId)) return "an id must start with a letter or _ and use only letters, digits, _ and -";
    if (this.rules.reservedIds.includes(newId)) return `"${newId}" is reserved`;
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
      return !dp || portCompatible(type, dp.type, this.rules);
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

  /** Positions for `nodes` (static/editor/layout.js), with the sizes measured on the canvas. */
  _layeredPositions(nodes) {
    return layeredPositions(nodes, this.doc.edges, (id) => this.geom.get(id) || {});
  }
}
