/* Automatic layout of the node graph: pure geometry on the document's nodes and edges (no DOM). */

const NO_SIZE = () => ({});

/** Positions ({x, y} by node id) for `nodes` wired by `edges`: each connected component laid out in layers,
 * components packed in rows. `sizeOf(id)` gives a node's measured {w, h} ({} when not measured). */
export function layeredPositions(nodes, edges, sizeOf) {
  sizeOf = sizeOf || NO_SIZE;
  const ids = new Set(nodes.map((n) => n.id));
  const parent = new Map(nodes.map((n) => [n.id, n.id]));
  const find = (x) => { while (parent.get(x) !== x) { parent.set(x, parent.get(parent.get(x))); x = parent.get(x); } return x; };
  for (const e of edges) if (ids.has(e.from) && ids.has(e.to)) parent.set(find(e.from), find(e.to));
  const comps = new Map();
  for (const n of nodes) {
    const r = find(n.id);
    if (!comps.has(r)) comps.set(r, []);
    comps.get(r).push(n);
  }
  if (comps.size === 1) return layeredComponent(nodes, edges, sizeOf);
  // workflow inputs wired to nothing yet: a column left of everything (inputs read left to right, like wires)
  const strayInputs = [...comps.values()].filter((m) => m.every((n) => n.section === "inputs")).flat();
  if (strayInputs.length && strayInputs.length < nodes.length) {
    const stray = new Set(strayInputs.map((n) => n.id));
    const rest = layeredPositions(nodes.filter((n) => !stray.has(n.id)), edges, sizeOf);
    const width = Math.max(180, ...strayInputs.map((n) => sizeOf(n.id).w || 220)) + 80;
    const out = new Map([...rest].map(([id, p]) => [id, { x: p.x + width, y: p.y }]));
    let y = 0;
    for (const n of strayInputs) {
      out.set(n.id, { x: 0, y });
      y += (sizeOf(n.id).h || 110) + 36;
    }
    return out;
  }
  const laid = [...comps.values()].map((members) => {
    const pos = layeredComponent(members, edges, sizeOf);
    let w = 0; let hh = 0;
    for (const n of members) {
      const g = sizeOf(n.id);
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

/** Layered (Sugiyama-style) layout of one component: longest-path layers, barycentre ordering, measured
 * sizes; inputs in the first column, outputs in the last, every wire going left to right (but one closing
 * a cycle, which an invalid workflow may have). */
export function layeredComponent(nodes, edges, sizeOf) {
  sizeOf = sizeOf || NO_SIZE;
  const ids = nodes.map((n) => n.id);
  const idSet = new Set(ids);
  const preds = new Map(ids.map((id) => [id, []]));
  const succs = new Map(ids.map((id) => [id, []]));
  for (const e of edges) {
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
  const heights = layers.map((ls) => ls.reduce((s, id) => s + (sizeOf(id).h || 110) + gapY, -gapY));
  const tallest = Math.max(0, ...heights);
  layers.forEach((ls, l) => {
    const width = Math.max(180, ...ls.map((id) => sizeOf(id).w || 220));
    let y = (tallest - heights[l]) / 2;
    for (const id of ls) {
      pos.set(id, { x, y: Math.round(y) });
      y += (sizeOf(id).h || 110) + gapY;
    }
    x += width + gapX;
  });
  return pos;
}
