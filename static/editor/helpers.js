/* Constants and small pure helpers of the node-graph editor (no DOM: safe in a worker or a test page). */

export const TYPE_COLORS = { text: "#3b82f6", number: "#f59e0b", candidates: "#8b5cf6", json: "#10b981", any: "#94a3b8" };
export const CATEGORY_COLORS = { io: "#64748b", generate: "#3b82f6", score: "#f59e0b", aggregate: "#8b5cf6",
  search: "#14b8a6", text: "#ec4899" }; // as in editor.css (.mge-cat-*)
export const CATEGORY_ORDER = ["io", "generate", "score", "aggregate", "search", "text", "workflows"];
export const CATEGORY_TITLES = {
  io: "Inputs & outputs", generate: "Generate", score: "Score", aggregate: "Aggregate",
  search: "Search", text: "Text", workflows: "Workflows", other: "Other",
};
export const HISTORY_LIMIT = 200;
export const CHANGE_DEBOUNCE_MS = 150;
export const RUN_STATES = ["queued", "running", "cached", "done", "error", "skipped"];

/** State shared by every editor on the page: `clipboard` = {nodes, edges} of the last copy, or null. */
export const shared = { clipboard: null };

export function stableStringify(x) {
  if (Array.isArray(x)) return `[${x.map(stableStringify).join(",")}]`;
  if (x && typeof x === "object") {
    return `{${Object.keys(x).filter((k) => x[k] !== undefined).sort()
      .map((k) => `${JSON.stringify(k)}:${stableStringify(x[k])}`).join(",")}}`;
  }
  return JSON.stringify(x === undefined ? null : x);
}

export function clone(x) { return x === undefined ? undefined : JSON.parse(JSON.stringify(x)); }
export function equal(a, b) { return JSON.stringify(a) === JSON.stringify(b); }
export function clamp(x, lo, hi) { return Math.max(lo, Math.min(hi, x)); }

/** "node.port" -> ["node", "port"]; null when `ref` is not of that shape. */
export function splitRef(ref) {
  if (typeof ref !== "string") return null;
  const i = ref.indexOf(".");
  if (i <= 0 || i === ref.length - 1) return null;
  return [ref.slice(0, i), ref.slice(i + 1)];
}

export function formatValue(v, max) {
  let s;
  if (v === null || v === undefined) s = "—";
  else if (typeof v === "string") s = v.replace(/\s+/g, " ").trim() || "\u2039empty\u203a";
  else if (Array.isArray(v)) s = v.join(", ");
  else if (typeof v === "object") s = JSON.stringify(v);
  else s = String(v);
  return s.length > max ? s.slice(0, max - 1) + "\u2026" : s;
}

/** `base` made into an id-like name that `taken` does not hold: base, base_2, base_3 ... */
export function uniqueName(base, taken) {
  base = String(base || "node").replace(/[^A-Za-z0-9_-]/g, "_").replace(/^([^A-Za-z_])/, "_$1");
  if (!taken.has(base)) return base;
  const stem = base.replace(/_\d+$/, "");
  for (let i = 2; ; i++) if (!taken.has(`${stem}_${i}`)) return `${stem}_${i}`;
}

/** Copy the methods of each class in `sources` onto `target.prototype` (the editor is built from such mixins). */
export function mixin(target, ...sources) {
  for (const source of sources) {
    for (const name of Object.getOwnPropertyNames(source.prototype)) {
      if (name === "constructor") continue;
      if (Object.prototype.hasOwnProperty.call(target.prototype, name)) {
        throw new Error(`metagen editor: method ${name} is defined twice`);
      }
      Object.defineProperty(target.prototype, name, Object.getOwnPropertyDescriptor(source.prototype, name));
    }
  }
  return target;
}
