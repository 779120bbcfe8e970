/* DOM helpers of the node-graph editor: element builders and the "is the user typing" test. */

export function h(tag, attrs, children) {
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

export function svg(tag, attrs) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  return el;
}

export function isTyping(target) {
  if (!target || !target.closest) return false;
  return Boolean(target.closest("input, textarea, select, [contenteditable=''], [contenteditable='true']"));
}

/** A small inline SVG icon of two stacked squares (a sub-workflow): drawn, not a font glyph, so it shows on every
 * system (U+29C9 rendered as an empty box where no font has it). */
export function stackIcon() {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 16 16");
  svg.setAttribute("width", "13");
  svg.setAttribute("height", "13");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("class", "mge-icon");
  for (const [x, y] of [[1.5, 1.5], [5.5, 5.5]]) {
    const rect = document.createElementNS(ns, "rect");
    for (const [k, v] of Object.entries({ x, y, width: 9, height: 9, rx: 1.5, fill: "none", stroke: "currentColor",
      "stroke-width": 1.5 })) rect.setAttribute(k, String(v));
    svg.appendChild(rect);
  }
  return svg;
}
