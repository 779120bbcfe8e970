/* The node palette: search, grouping by category, click or drag a kind onto the canvas. */

const V = new URL(import.meta.url).search; // the entry's ?v=<version>: every module is fetched with it
const { CATEGORY_ORDER, CATEGORY_TITLES } = await import(`./helpers.js${V}`);
const { h } = await import(`./dom.js${V}`);

/** Methods of Editor (static/editor/index.js mixes them into its prototype). */
export default class PaletteMethods {
  _paletteEntries() {
    const entries = [...this.kinds.values()];
    return entries.concat(this._workflowEntries());
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
          ...(def.workflow ? { "data-workflow": def.workflow } : {}),
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
      if (!moved) { this._addFromPalette(item, null); return; }
      const r = this.viewport.getBoundingClientRect();
      if (ev.clientX >= r.left && ev.clientX <= r.right && ev.clientY >= r.top && ev.clientY <= r.bottom) {
        const at = this._visibleDropPoint(ev.clientX, ev.clientY);  // dropped over the inspector: beside it
        const p = this.toWorld(at.x, at.y);
        this._addFromPalette(item, { x: p.x - 20, y: p.y - 14 });
      }
      this.root.focus({ preventScroll: true });
    };
    document.addEventListener("pointermove", move, true);
    document.addEventListener("pointerup", up, true);
  }
}
