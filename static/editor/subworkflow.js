/* Sub-workflows in the editor: a workflow node's ports are its child's, the palette's "Workflows" section, "Make
 * sub-workflow" from the selection (Ctrl+G), and double-click to open a child (the host keeps the breadcrumb). */

const V = new URL(import.meta.url).search; // the entry's ?v=<version>: every module is fetched with it
const { clone, uniqueName } = await import(`./helpers.js${V}`);

export const WORKFLOW_KIND = "workflow";
export const ROUTE_KIND = "route";
const CHILD_INPUT_TYPES = { text: "text", number: "number", json: "json" };
const NAME_OK = /^[A-Za-z0-9_][A-Za-z0-9_ .-]*$/;

/** A workflow node's mapped input: the node's `map`, else its `params.map` (null when neither is set). */
export function mappedInput(node) {
  const value = node.map !== undefined && node.map !== null ? node.map : (node.params || {}).map;
  return value === undefined || value === null || value === "" ? null : String(value);
}

/** The schema entry of a workflow node bound to its child's ports (`child`: {inputs, outputs}). */
export function boundDef(def, node, child) {
  const mapped = mappedInput(node);
  const inputs = (child.inputs || []).map((p) => Object.assign({}, p, p.name === mapped ? { type: "candidates" } : {}));
  const outputs = mapped ? (def.outputs || []).map((p) => Object.assign({}, p)) : (child.outputs || []).map(
    (p) => Object.assign({}, p));
  return Object.assign({}, def, { inputs, outputs, variadic_inputs: false });
}

/** The schema entry of a route node bound to its first branch's ports (`branch`: {inputs, outputs}): its own
 * `score` input first, then the branch's inputs; the branch's outputs, then its own `branch` and `bin`. */
export function routeDef(def, branch) {
  const own = new Set((def.inputs || []).map((p) => p.name).concat((def.outputs || []).map((p) => p.name)));
  const inputs = (def.inputs || []).concat((branch.inputs || []).filter((p) => !own.has(p.name)))
    .map((p) => Object.assign({}, p));
  const outputs = (branch.outputs || []).filter((p) => !own.has(p.name)).concat(def.outputs || [])
    .map((p) => Object.assign({}, p));
  return Object.assign({}, def, { inputs, outputs, variadic_inputs: false });
}

/** A route node's first branch name ("" when it names none). */
function firstBranch(node) {
  const branches = (node.params || {}).branches;
  return Array.isArray(branches) && branches.length ? String(branches[0]) : "";
}

/** Methods of Editor (static/editor/index.js mixes them into its prototype). */
export default class SubworkflowMethods {
  /** The workflows a workflow node may use, with their ports: {name: {inputs: [{name, type, required,
   * description}], outputs: [{name, type}]}}; the palette's Workflows section and the nodes' ports follow. */
  setWorkflows(workflows) {
    const before = this.workflows || new Map();
    this.workflows = new Map(Object.entries(workflows || {}));
    // a child that changed (its ports or its hash) marks the workflow nodes that use it until the next load
    const changed = new Set([...this.workflows.keys()].filter((name) => before.has(name)
      && JSON.stringify(before.get(name)) !== JSON.stringify(this.workflows.get(name))));
    for (const name of changed) this.markChildChanged(name, true);
    this._renderPalette();
    this.render();
    this._renderInspector(true);
  }

  /** Mark the workflow nodes that use `name` as changed (class mge-child-changed, a message), after their child
   * was edited and saved; the marks last until the next load. */
  markChildChanged(name, quiet) {
    const marked = this.doc.nodes.filter((n) => n.kind === WORKFLOW_KIND && String((n.params || {}).workflow) === name);
    if (!marked.length) return;
    this.childChanged = new Set([...(this.childChanged || []), ...marked.map((n) => n.id)]);
    this.message(`${marked.map((n) => n.id).join(", ")}: the workflow ${name} changed; ports updated, `
      + "wires that no longer fit are marked", "info");
    if (!quiet) this.render();
  }

  /** The schema entry that decides a node's ports: a workflow node's is bound to its child's. */
  nodeDef(node) {
    const def = this.kindDef(node.kind);
    if (def && node.kind === ROUTE_KIND && this.workflows) {
      const branch = this.workflows.get(firstBranch(node));
      return branch ? routeDef(def, branch) : def;
    }
    if (!def || node.kind !== WORKFLOW_KIND || !this.workflows) return def;
    const child = this.workflows.get(String((node.params || {}).workflow || ""));
    return child ? boundDef(def, node, child) : def;
  }

  /** The ports of a workflow node's child (null for other nodes): part of a node's render signature. */
  _childPorts(node) {
    if ((node.kind !== WORKFLOW_KIND && node.kind !== ROUTE_KIND) || !this.workflows) return null;
    const name = node.kind === ROUTE_KIND ? firstBranch(node) : String((node.params || {}).workflow || "");
    const ports = this.workflows.get(name) || null;
    return ports && this.childChanged && this.childChanged.has(node.id) ? Object.assign({ changed: true }, ports)
      : ports;
  }

  /** Palette entries of the Workflows section: one per known workflow. */
  _workflowEntries() {
    if (!this.workflows || !this.kindDef(WORKFLOW_KIND)) return [];
    return [...this.workflows.entries()].map(([name, ports]) => ({
      kind: WORKFLOW_KIND, workflow: name, title: name, category: "workflows",
      description: `workflow ${name}: inputs ${(ports.inputs || []).map((p) => p.name).join(", ") || "none"}; `
        + `outputs ${(ports.outputs || []).map((p) => p.name).join(", ") || "none"}`,
    }));
  }

  /** Add a node from a palette item (a workflow item adds a workflow node using that workflow). */
  _addFromPalette(item, at) {
    const kind = item.getAttribute("data-kind");
    const workflow = item.getAttribute("data-workflow");
    if (!workflow) return this.addNode(kind, at);
    const id = uniqueName(workflow.replace(/[^A-Za-z0-9_-]/g, "_").replace(/^([^A-Za-z_])/, "_$1"), this._takenIds());
    return this.addNode(kind, at, (node) => { node.id = id; node.params = { workflow }; });
  }

  /** Double-click on a workflow node: ask the host to open its child. True when handled. */
  _openChild(nodeId) {
    const node = this.node(nodeId);
    const name = node && node.kind === WORKFLOW_KIND && String((node.params || {}).workflow || "");
    if (!name || !this.opts.onOpenWorkflow) return false;
    this.opts.onOpenWorkflow(name, nodeId);
    return true;
  }

  /** What "Make sub-workflow" would do with the selection: the child workflow JSON and how to rewire, or
   * {problem} when the selection cannot become one. */
  _subworkflowPlan(name, renames) {
    const ids = new Set([...this.selection].filter((id) => { const n = this.node(id); return n && !n.section; }));
    if (!ids.size) return { problem: "select the nodes to move into a sub-workflow first" };
    const incoming = this.doc.edges.filter((e) => !ids.has(e.from) && ids.has(e.to));
    const outgoing = this.doc.edges.filter((e) => ids.has(e.from) && !ids.has(e.to));
    const portType = (e) => ((this.outputPorts(this.node(e.from)).find((p) => p.name === e.out) || {}).type);
    const crossing = incoming.find((e) => !CHILD_INPUT_TYPES[portType(e)] && portType(e) !== "any");
    if (crossing) {
      return { problem: `${crossing.from}.${crossing.out} is a ${portType(crossing)} wire: a sub-workflow's inputs `
        + "are text, number or json; add its producer to the selection" };
    }
    const inputs = new Map(); // "from.out" -> {name, type}
    const names = new Set();
    for (const e of incoming) {
      const key = `${e.from}.${e.out}`;
      if (inputs.has(key)) continue;
      const src = this.node(e.from);
      const name = uniqueName(src.section === "inputs" ? src.params.name : e.in, names);
      names.add(name);
      inputs.set(key, { name, type: CHILD_INPUT_TYPES[portType(e)] || "json" });
    }
    const outputs = new Map();
    const outNames = new Set();
    for (const e of outgoing) {
      const key = `${e.from}.${e.out}`;
      if (outputs.has(key)) continue;
      const name = uniqueName(e.out, outNames);
      outNames.add(name);
      outputs.set(key, { name, type: portType(e) || "json" });
    }
    const renamed = this._renamePorts(inputs, (renames || {}).inputs) || this._renamePorts(outputs,
      (renames || {}).outputs);
    if (renamed) return { problem: renamed };
    const nodes = this.doc.nodes.filter((n) => ids.has(n.id));
    const x0 = Math.min(...nodes.map((n) => n.x || 0));
    const y0 = Math.min(...nodes.map((n) => n.y || 0));
    const child = { version: 1, name, nodes: [], outputs: {}, layout: {} };
    if (this.doc.meta.models && Object.keys(this.doc.meta.models).length) child.models = clone(this.doc.meta.models);
    if (inputs.size) {
      child.inputs = {};
      for (const { name: n, type } of inputs.values()) child.inputs[n] = { type };
    }
    for (const n of nodes) {
      const entry = { id: n.id, kind: n.kind };
      if (n.model) entry.model = n.model;
      if (n.map !== undefined && n.map !== null) entry.map = n.map;
      if (n.params && Object.keys(n.params).length) entry.params = clone(n.params);
      const ins = Object.assign({}, n.raw || {});
      for (const e of this.doc.edges.filter((x) => x.to === n.id)) {
        ins[e.in] = ids.has(e.from) ? `${e.from}.${e.out}` : `inputs.${inputs.get(`${e.from}.${e.out}`).name}`;
      }
      if (Object.keys(ins).length) entry.inputs = ins;
      child.nodes.push(entry);
      child.layout[n.id] = [Math.round((n.x || 0) - x0 + 300), Math.round((n.y || 0) - y0 + 60)];
    }
    for (const [key, { name: n }] of outputs) child.outputs[n] = key;
    let row = 0;
    for (const n of inputs.values()) child.layout[`inputs.${n.name}`] = [40, 60 + 110 * row++];
    const right = Math.max(...Object.values(child.layout).map((p) => p[0])) + 300;
    row = 0;
    for (const n of outputs.values()) child.layout[`outputs.${n.name}`] = [right, 60 + 110 * row++];
    const ports = {
      inputs: [...inputs.values()].map((p) => ({ name: p.name, type: p.type, required: true, description: "" })),
      outputs: [...outputs.values()].map((p) => ({ name: p.name, type: p.type })),
    };
    return { ids, nodes, incoming, outgoing, inputs, outputs, child, ports,
      at: { x: nodes.reduce((s, n) => s + (n.x || 0), 0) / nodes.length,
        y: nodes.reduce((s, n) => s + (n.y || 0), 0) / nodes.length } };
  }

  /** Give the inferred port names of `ports` ("from.out" -> {name}) the names `renames` (old -> new) asks for;
   * a problem text when a new name is not an identifier or is taken twice (nothing renamed then). */
  _renamePorts(ports, renames) {
    if (!renames) return null;
    const wanted = [...ports.values()].map((p) => String(renames[p.name] || p.name).trim());
    const bad = wanted.find((n) => !/^[A-Za-z_][A-Za-z0-9_]*$/.test(n));
    if (bad !== undefined) return `"${bad}" cannot be a port name: use letters, digits and _ (not first)`;
    if (new Set(wanted).size !== wanted.length) return "two inputs or two outputs would have the same name";
    [...ports.values()].forEach((p, i) => { p.name = wanted[i]; });
    return null;
  }

  /** The inferred inputs and outputs of a sub-workflow of the selection (names and types), for a naming dialog. */
  subworkflowPorts() {
    const plan = this._subworkflowPlan("subworkflow");
    return plan.problem ? { problem: plan.problem } : plan.ports;
  }

  /** Move the selected nodes into a new workflow `name` (asked for when not given: the host's
   * opts.onNameSubworkflow({suggestion, inputs, outputs}) -> Promise<{name, inputs, outputs} | null> names it and
   * renames its ports, else a prompt names it), with its inferred port names renamed by `renames` ({inputs: {old:
   * new}, outputs: {...}}): the host writes the file (opts.onMakeSubworkflow(name, childWorkflow) -> Promise),
   * then one workflow node replaces the selection, wired as the selection was (one undo step). Resolves to the new
   * node's id, or null. */
  async makeSubworkflow(name, renames) {
    const taken = new Set(this.workflows ? this.workflows.keys() : []);
    if (name === undefined || name === null) {
      const suggestion = uniqueName("subworkflow", taken);
      const ports = this.subworkflowPorts();
      if (ports.problem) { this.message(ports.problem, "warning"); return null; }
      if (this.opts.onNameSubworkflow) { // the host's dialog: {name, inputs: {old: new}, outputs: {old: new}}
        const answer = await this.opts.onNameSubworkflow({ suggestion, inputs: ports.inputs, outputs: ports.outputs });
        if (!answer) return null;
        name = answer.name;
        renames = { inputs: answer.inputs || {}, outputs: answer.outputs || {} };
      } else {
        name = typeof window.prompt === "function" ? window.prompt("Name of the new workflow", suggestion) : suggestion;
        if (name === null) return null;
      }
    }
    name = String(name).trim();
    if (!NAME_OK.test(name) || name.endsWith(".") || name.length > 100) {
      this.message(`"${name}" cannot be a workflow name: use letters, digits, space, _ . -`, "error");
      return null;
    }
    if (taken.has(name)) {
      this.message(`a workflow named "${name}" already exists; choose another name`, "error");
      return null;
    }
    const plan = this._subworkflowPlan(name, renames);
    if (plan.problem) { this.message(plan.problem, "warning"); return null; }
    if (this.opts.onMakeSubworkflow) {
      try {
        await this.opts.onMakeSubworkflow(name, plan.child);
      } catch (err) {
        this.message(`the sub-workflow was not saved: ${(err && err.message) || err}`, "error");
        return null;
      }
    }
    if (!this.workflows) this.workflows = new Map();
    this.workflows.set(name, plan.ports);
    const id = uniqueName(name.replace(/[^A-Za-z0-9_-]/g, "_").replace(/^([^A-Za-z_])/, "_$1"), new Set(
      [...this._takenIds()].filter((x) => !plan.ids.has(x))));
    const models = Object.keys(this.doc.meta.models || {});
    const params = { workflow: name };
    if (models.length) params.models = Object.fromEntries(models.map((m) => [m, m]));
    this.mutate("make sub-workflow", () => {
      this.doc.nodes = this.doc.nodes.filter((n) => !plan.ids.has(n.id));
      this.doc.edges = this.doc.edges.filter((e) => !plan.ids.has(e.from) && !plan.ids.has(e.to));
      this.doc.nodes.push({ id, kind: WORKFLOW_KIND, model: null, params, raw: {},
        x: Math.round(plan.at.x), y: Math.round(plan.at.y) });
      for (const e of plan.incoming) {
        const port = plan.inputs.get(`${e.from}.${e.out}`).name;
        if (!this.doc.edges.some((x) => x.to === id && x.in === port)) {
          this.doc.edges.push({ from: e.from, out: e.out, to: id, in: port });
        }
      }
      for (const e of plan.outgoing) {
        this.doc.edges.push({ from: id, out: plan.outputs.get(`${e.from}.${e.out}`).name, to: e.to, in: e.in });
      }
    });
    const step = this.undoStack[this.undoStack.length - 1];
    if (step && step.label === "make sub-workflow") step.made = name;  // its undo tells the host (the file)
    this._renderPalette();
    this.select(id);
    this._emitSelect();
    this.message(`made workflow "${name}" of ${plan.ids.size} node(s)`, "info");
    return id;
  }
}
