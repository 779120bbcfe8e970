/* The editor's document <-> workflow JSON (app.workflow Workflow.to_dict() shape). No DOM.
 *
 * The document: {meta: {version, name, description, models, extra}, nodes: [...], edges: [...]} where a node is
 * {id, kind, model, params, raw, x, y, section?}: workflow inputs / outputs are nodes too, with ids
 * "inputs.<name>" / "outputs.<name>" and section "inputs" / "outputs"; an edge is {from, out, to, in}; `raw`
 * keeps the refs that name nothing (port -> "ref"), so that loading a broken workflow loses nothing.
 */

const V = new URL(import.meta.url).search; // the entry's ?v=<version>: every module is fetched with it
const { clone, splitRef, uniqueName } = await import(`./helpers.js${V}`);
const { compileRules } = await import(`./rules.js${V}`);

/** The workflow keys the canvas draws; any other top-level key (`tags`, a tuned workflow's provenance...) is kept
 * as it came in `meta.extra` and written back unchanged. */
const DRAWN_KEYS = new Set(["version", "name", "description", "models", "inputs", "nodes", "outputs", "layout"]);

export function emptyDoc() {
  return { meta: { version: 1, name: "untitled", description: "", models: {} }, nodes: [], edges: [] };
}

/** The document of workflow JSON `wf`; `inputKind` / `outputKind` are the kinds given to the input / output
 * pseudo-nodes. Returns {doc, notes}: notes are warnings for the user (e.g. an id used twice). */
export function docFromWorkflow(wf, { inputKind, outputKind, rules }) {
  rules = compileRules(rules);
  wf = wf || {};
  const doc = emptyDoc();
  const notes = [];
  doc.meta.version = wf.version || 1;
  doc.meta.name = wf.name === undefined || wf.name === null ? "untitled" : String(wf.name);
  doc.meta.description = wf.description ? String(wf.description) : "";
  doc.meta.models = wf.models && typeof wf.models === "object" ? clone(wf.models) : {};
  const extra = Object.keys(wf).filter((k) => !DRAWN_KEYS.has(k));
  if (extra.length) doc.meta.extra = Object.fromEntries(extra.map((k) => [k, clone(wf[k])]));
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
    addNode({ id: `inputs.${name}`, kind: inputKind, section: "inputs", model: null, params, raw: {} });
  }
  const nodes = Array.isArray(wf.nodes) ? wf.nodes : [];
  const seenIds = new Set(rules.reservedIds);
  for (const entry of nodes) {
    if (!entry || typeof entry !== "object") continue;
    let id = entry.id === undefined || entry.id === null ? "" : String(entry.id);
    if (seenIds.has(id)) {
      // two nodes cannot share a canvas slot: the later one gets a fresh id (wires keep the first)
      const fresh = uniqueName(id || "node", seenIds);
      notes.push(`node id "${id}" is used twice: the second one is now "${fresh}"`);
      id = fresh;
    }
    seenIds.add(id);
    addNode({
      id,
      kind: String(entry.kind || ""),
      model: entry.model === undefined || entry.model === null ? null : String(entry.model),
      params: entry.params && typeof entry.params === "object" ? clone(entry.params) : {},
      ...(entry.map !== undefined && entry.map !== null ? { map: String(entry.map) } : {}),  // workflow nodes
      raw: {},
      wiring: entry.inputs && typeof entry.inputs === "object" ? entry.inputs : {},
    });
  }
  const outputs = (wf.outputs && typeof wf.outputs === "object") ? wf.outputs : {};
  for (const name of Object.keys(outputs)) {
    addNode({ id: `outputs.${name}`, kind: outputKind, section: "outputs", model: null,
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
  return { doc, notes };
}

/** The workflow JSON of document `d` (layout included: node id -> [x, y] for the placed nodes). */
export function workflowFromDoc(d) {
  const wf = { version: d.meta.version || 1, name: d.meta.name };
  if (d.meta.description) wf.description = d.meta.description;
  if (d.meta.extra) Object.assign(wf, clone(d.meta.extra));
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
      if (p.default !== undefined && p.default !== null) spec.default = clone(p.default);  // "" is a real default
      if (p.description) spec.description = p.description;
      inputs[p.name] = spec;
    } else if (n.section === "outputs") {
      const e = edges.find((x) => x.in === "value");
      const ref = e ? refOf(e) : (n.raw && n.raw.value) || "";
      outputs[n.params.name] = ref;
    } else {
      const entry = { id: n.id, kind: n.kind };
      if (n.model) entry.model = n.model;
      if (n.map !== undefined && n.map !== null) entry.map = n.map;
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
