/* The quick-add search box ("/", Space, double-click, or a wire dropped on the canvas). */

const V = new URL(import.meta.url).search; // the entry's ?v=<version>: every module is fetched with it
const { clamp } = await import(`./helpers.js${V}`);
const { h } = await import(`./dom.js${V}`);

/** Methods of Editor (static/editor/index.js mixes them into its prototype). */
export default class QuickAddMethods {
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
}
