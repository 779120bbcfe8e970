/* Schema and graph rules of the node-graph editor: which ids, names and wires are allowed, and which ports a
 * node has. No DOM: importable from a worker or a test page (static/editor/tests.html).
 *
 * The rules themselves come from Python, never re-typed here: `nodes.registry.graph_rules()` gives
 *   {node_id_pattern, reserved_ids, template_var_pattern, reserved_vars, port_types, port_compatibility}
 * and compileRules() turns that into the object every function below takes as `rules`.
 */

/** Value types a workflow input may declare. */
export const INPUT_TYPES = ["text", "number", "json"];
/** A workflow input / output name (an identifier: it is used as {name} in prompts). */
export const NAME_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** The "+ input" port of variadic kinds: a wire dropped there becomes a new input. */
export const ADD_PORT = "+";
/** The editor's own port type for ports whose type is decided by the wire (template variables, outputs). */
export const ANY = "any";

export const BUILTIN_INPUT = {
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
export const BUILTIN_OUTPUT = {
  kind: "output", title: "Workflow output", category: "io", section: "outputs",
  description: "A result of the workflow: wire any node output into it.",
  inputs: [{ name: "value", type: "json", description: "the value to return", required: true }], outputs: [],
  params: [{ name: "name", type: "str", default: "output", description: "name of the output (an identifier)",
    required: true }],
  variadic_inputs: false, uses_model: false,
};

export const RULES_REQUIRED = "MetagenEditor.mount: options.rules is required (nodes.registry.graph_rules())";
const RULE_KEYS = ["node_id_pattern", "reserved_ids", "template_var_pattern", "reserved_vars", "port_types",
  "port_compatibility"];
const compiled = new WeakSet();

/** The rules exported by `nodes.registry.graph_rules()`, compiled for use (an already compiled object is
 * returned as it is). Throws an Error naming what is missing or malformed. */
export function compileRules(raw) {
  if (raw && compiled.has(raw)) return raw;
  if (!raw || typeof raw !== "object") throw new Error(RULES_REQUIRED);
  const missing = RULE_KEYS.filter((k) => raw[k] === undefined || raw[k] === null);
  if (missing.length) throw new Error(`${RULES_REQUIRED}: it lacks ${missing.join(", ")}`);
  const list = (key) => {
    if (!Array.isArray(raw[key])) throw new Error(`MetagenEditor rules: ${key} must be a list`);
    return raw[key].map(String);
  };
  const table = raw.port_compatibility;
  if (typeof table !== "object" || Array.isArray(table)) {
    throw new Error("MetagenEditor rules: port_compatibility must map a type to the types it may feed");
  }
  const compat = {};
  for (const [source, targets] of Object.entries(table)) {
    if (!Array.isArray(targets)) throw new Error(`MetagenEditor rules: port_compatibility.${source} must be a list`);
    compat[source] = targets.map(String);
  }
  const rules = Object.freeze({
    raw,
    // Python full-matches NODE_ID_RE; the template pattern is searched for every occurrence
    nodeId: new RegExp(`^(?:${raw.node_id_pattern})$`),
    reservedIds: Object.freeze(list("reserved_ids")),
    templateVar: new RegExp(raw.template_var_pattern, "g"),
    reservedVars: Object.freeze(list("reserved_vars")),
    portTypes: Object.freeze(list("port_types")),
    compat: Object.freeze(compat),
  });
  compiled.add(rules);
  return rules;
}

/** The {variables} of a prompt template, in order of first use ({{ and }} are literal braces). */
export function templateVariables(text, rules) {
  const seen = [];
  if (typeof text !== "string") return seen;
  for (const m of text.matchAll(compileRules(rules).templateVar)) if (!seen.includes(m[1])) seen.push(m[1]);
  return seen;
}

/** Whether an output of type `source` may feed an input of type `target` (the editor's "any" fits both ways). */
export function portCompatible(source, target, rules) {
  if (source === ANY || target === ANY) return true;
  const allowed = compileRules(rules).compat[source];
  return allowed ? allowed.includes(target) : source === target;
}

/** Why `id` cannot be a node id ("invalid" / "reserved"), or null when it can. */
export function nodeIdProblem(id, rules) {
  rules = compileRules(rules);
  if (!rules.nodeId.test(String(id))) return "invalid";
  if (rules.reservedIds.includes(id)) return "reserved";
  return null;
}

/** The schema as the editor uses it: kind -> entry, plus the entries of the workflow input / output
 * pseudo-nodes (section "inputs" / "outputs"; built-in fallbacks when the schema has none). */
export function readSchema(schema) {
  const kinds = new Map();
  let inputKind = BUILTIN_INPUT;
  let outputKind = BUILTIN_OUTPUT;
  for (let entry of schema || []) {
    if (!entry || !entry.kind) continue;
    if (!entry.section && entry.category === "io" && (entry.kind === "input" || entry.kind === "output")) {
      // registries that do not export `section` yet: the io kinds are known by name
      entry = Object.assign({}, entry, { section: entry.kind === "input" ? "inputs" : "outputs" });
    }
    if (entry.section === "inputs") inputKind = entry;
    else if (entry.section === "outputs") outputKind = entry;
    kinds.set(entry.kind, entry);
  }
  kinds.set(inputKind.kind, inputKind);
  kinds.set(outputKind.kind, outputKind);
  return { kinds, inputKind, outputKind };
}

export function paramsOf(def) { return (def && def.params) || []; }

/** A node's params with the schema defaults filled in. */
export function resolvedParams(node, def) {
  const out = {};
  for (const p of paramsOf(def)) out[p.name] = p.default;
  return Object.assign(out, node.params || {});
}

export function paramVisible(param, resolved) {
  const cond = param.show_if;
  if (!cond) return true;
  if (Array.isArray(cond)) return (cond[1] || []).includes(resolved[cond[0]]);
  return (cond.values || []).includes(resolved[cond.param]);
}

/** Input ports of `node` (schema entry `def`, or null when its kind is unknown) given the document's `edges`:
 * declared, template variables (variadic kinds), and any wired extras. */
export function inputPorts(node, def, edges, rules) {
  const ports = [];
  const seen = new Set();
  const add = (p) => { if (!seen.has(p.name)) { seen.add(p.name); ports.push(p); } };
  if (node.section === "outputs") {
    add({ name: "value", type: ANY, description: "the value to return", required: true });
    return ports;
  }
  if (def) for (const p of def.inputs || []) add(Object.assign({}, p));
  const variadic = Boolean(def && def.variadic_inputs);
  if (variadic) {
    // {variables} of the text params in use (show_if honoured), minus those the node fills itself
    const resolved = resolvedParams(node, def);
    const reserved = new Set(def.reserved_vars || compileRules(rules).reservedVars);
    for (const p of paramsOf(def)) {
      if (p.type !== "text" || !paramVisible(p, resolved)) continue;
      for (const v of templateVariables(resolved[p.name], rules)) {
        if (reserved.has(v)) continue;
        add({ name: v, type: ANY, description: `{${v}} in ${p.name}`, required: true, variable: true });
      }
    }
  }
  // wired names beyond those: extra inputs of a variadic kind, or stale wires of any other kind
  const extra = variadic ? { type: ANY, required: false, extra: true, description: "an extra input" }
    : { type: ANY, required: false, stale: Boolean(def), description: def ? "this node has no such input: delete the wire" : "" };
  for (const e of edges) if (e.to === node.id && !seen.has(e.in)) add(Object.assign({ name: e.in }, extra));
  for (const port of Object.keys(node.raw || {})) if (!seen.has(port)) add(Object.assign({ name: port }, extra));
  return ports;
}

/** Output ports of `node` (schema entry `def` or null) given the document's `edges`. */
export function outputPorts(node, def, edges) {
  if (node.section === "inputs") {
    const t = (node.params && node.params.type) || "text";
    return [{ name: "value", type: INPUT_TYPES.includes(t) ? t : ANY, description: "the input's value" }];
  }
  if (node.section === "outputs") return [];
  const ports = def ? (def.outputs || []).map((p) => Object.assign({}, p)) : [];
  for (const e of edges) {
    if (e.from === node.id && !ports.some((p) => p.name === e.out)) {
      ports.push({ name: e.out, type: ANY, stale: Boolean(def) });
    }
  }
  return ports;
}
