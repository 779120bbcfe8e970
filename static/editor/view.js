/* The view: pan/zoom transform, minimap, fit, panel visibility, narrow-host behaviour and the toolbar state. */

const V = new URL(import.meta.url).search; // the entry's ?v=<version>: every module is fetched with it
const { CATEGORY_COLORS, clamp } = await import(`./helpers.js${V}`);

/** Methods of Editor (static/editor/index.js mixes them into its prototype). */
export default class ViewMethods {
  /** Issue details at screen size (readable at any zoom) while the pointer is on a node's badge. */
  _onTipOver(e) {
    const badge = e.target.closest && e.target.closest(".mge-issue-badge");
    if (!badge || this.drag) return;
    const pop = badge.querySelector(".mge-issue-pop");
    this.tip.textContent = "";
    for (const child of pop.children) this.tip.appendChild(child.cloneNode(true));
    const vr = this.viewport.getBoundingClientRect();
    const br = badge.getBoundingClientRect();
    this.tip.hidden = false;
    const left = clamp(br.left + br.width / 2 - vr.left - 140, 4, Math.max(4, vr.width - 284));
    const below = br.bottom - vr.top + 6;
    const top = below + this.tip.offsetHeight > vr.height ? Math.max(4, br.top - vr.top - this.tip.offsetHeight - 6) : below;
    this.tip.style.left = `${left}px`;
    this.tip.style.top = `${top}px`;
  }

  /** Pan so that node `id` is not hidden under the floating inspector (narrow hosts). */
  _reveal(id) {
    const el = this.nodeEls.get(id);
    if (!el || !this.root.classList.contains("mge-narrow") || getComputedStyle(this.inspector).display === "none") return;
    const nr = el.getBoundingClientRect();
    const ir = this.inspector.getBoundingClientRect();
    const vr = this.viewport.getBoundingClientRect();
    if (nr.right + 12 <= ir.left || nr.bottom < ir.top || nr.top > ir.bottom) return;
    const dx = Math.min(nr.right + 16 - ir.left, Math.max(0, nr.left - vr.left - 16));
    if (dx <= 0) return;
    this.view.x -= dx;
    this._applyView();
  }

  _applyWidthClasses() {
    const width = this.root.clientWidth;
    this.root.classList.toggle("mge-narrow", width > 0 && width < 1100);
    this.root.classList.toggle("mge-tiny", width > 0 && width < 760);
  }

  /** Show/hide the palette or the inspector (`show` undefined = toggle). */
  togglePanel(which, show) {
    const cls = `mge-hide-${which}`;
    const hide = show === undefined ? !this.root.classList.contains(cls) : !show;
    this.root.classList.toggle(cls, hide);
    const b = this.toolbar.querySelector(`[data-testid="editor-toggle-${which}"]`);
    if (b) b.setAttribute("aria-pressed", String(!hide));
    this._scheduleMinimap();
  }

  _onResize() {
    this._applyWidthClasses();
    if (this.viewport.clientWidth === 0) return;
    let stale = false;
    for (const g of this.geom.values()) if (!g.w) { stale = true; break; }
    if (stale) { this.geom.clear(); this.nodeEls.forEach((el) => this._measure(el)); this._renderWires(); }
    if (this.pendingFit) this.fitView();
  }

  _updateToolbar() {
    const set = (id, on, title) => {
      const b = this.toolbar.querySelector(`[data-testid="editor-${id}"]`);
      if (b) { b.disabled = !on; if (title) b.title = title; }
    };
    const lastUndo = this.undoStack[this.undoStack.length - 1];
    const lastRedo = this.redoStack[this.redoStack.length - 1];
    set("undo", Boolean(lastUndo), `Undo${lastUndo ? ` ${lastUndo.label}` : ""} (Ctrl+Z)`);
    set("redo", Boolean(lastRedo), `Redo${lastRedo ? ` ${lastRedo.label}` : ""} (Ctrl+Shift+Z / Ctrl+Y)`);
    set("delete", this.selection.size > 0 || this.selectedWire !== null);
  }

  _applyView() {
    const v = this.view;
    this.world.style.transform = `translate(${v.x}px, ${v.y}px) scale(${v.z})`;
    const grid = 24 * v.z;
    this.viewport.style.backgroundSize = `${grid}px ${grid}px`;
    this.viewport.style.backgroundPosition = `${v.x}px ${v.y}px`;
    if (this.zoomLabel) this.zoomLabel.textContent = `${Math.round(v.z * 100)}%`;
    this._scheduleMinimap();
  }

  _scheduleMinimap() {
    if (this._minimapFrame || !this.minimap) return;
    const raf = window.requestAnimationFrame || ((fn) => setTimeout(fn, 16));
    this._minimapFrame = raf(() => { this._minimapFrame = null; this._drawMinimap(); });
  }

  /** The overview: every node as a block in its category colour, and the visible area as a frame. */
  _drawMinimap() {
    const cv = this.minimap;
    const show = this.doc.nodes.length > 1 && !this.root.classList.contains("mge-hide-minimap");
    cv.hidden = !show;
    if (!show || !this.viewport.clientWidth) return;
    const b = this._bounds();
    const vw = this.viewport.clientWidth / this.view.z;
    const vh = this.viewport.clientHeight / this.view.z;
    const vx = -this.view.x / this.view.z;
    const vy = -this.view.y / this.view.z;
    const x0 = Math.min(b.x0, vx); const y0 = Math.min(b.y0, vy);
    const x1 = Math.max(b.x1, vx + vw); const y1 = Math.max(b.y1, vy + vh);
    const pad = 6;
    const W = 180;
    const H = 120;
    const dpr = window.devicePixelRatio || 1;
    if (cv.width !== Math.round(W * dpr)) { cv.width = Math.round(W * dpr); cv.height = Math.round(H * dpr); }
    const k = Math.min((W - 2 * pad) / (x1 - x0 || 1), (H - 2 * pad) / (y1 - y0 || 1));
    const ox = pad + ((W - 2 * pad) - (x1 - x0) * k) / 2 - x0 * k;
    const oy = pad + ((H - 2 * pad) - (y1 - y0) * k) / 2 - y0 * k;
    this._minimapMap = { k, ox, oy };
    const ctx = cv.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, W, H);
    for (const n of this.doc.nodes) {
      const g = this.geom.get(n.id) || {};
      const def = this.kindDef(n.kind);
      ctx.fillStyle = CATEGORY_COLORS[def && def.category] || "#94a3b8";
      ctx.globalAlpha = this.selection.has(n.id) ? 1 : 0.7;
      ctx.fillRect(ox + n.x * k, oy + n.y * k, Math.max(2, (g.w || 220) * k), Math.max(2, (g.h || 110) * k));
    }
    ctx.globalAlpha = 1;
    ctx.strokeStyle = "#f97316";
    ctx.lineWidth = 1.5;
    ctx.strokeRect(ox + vx * k, oy + vy * k, vw * k, vh * k);
  }

  _onMinimapPointer(e) {
    const m = this._minimapMap;
    if (!m || (e.type === "pointermove" && !(e.buttons & 1))) return;
    e.preventDefault();
    e.stopPropagation();
    const r = this.minimap.getBoundingClientRect();
    const wx = (e.clientX - r.left - m.ox) / m.k;
    const wy = (e.clientY - r.top - m.oy) / m.k;
    this.view.x = this.viewport.clientWidth / 2 - wx * this.view.z;
    this.view.y = this.viewport.clientHeight / 2 - wy * this.view.z;
    this._applyView();
  }

  toWorld(clientX, clientY) {
    const r = this.viewport.getBoundingClientRect();
    return { x: (clientX - r.left - this.view.x) / this.view.z, y: (clientY - r.top - this.view.y) / this.view.z };
  }

  _zoomAt(factor, clientX, clientY) {
    const r = this.viewport.getBoundingClientRect();
    const sx = clientX - r.left;
    const sy = clientY - r.top;
    const z = clamp(this.view.z * factor, 0.15, 2.5);
    const k = z / this.view.z;
    this.view.x = sx - (sx - this.view.x) * k;
    this.view.y = sy - (sy - this.view.y) * k;
    this.view.z = z;
    this._applyView();
  }

  _zoomBy(factor) {
    const r = this.viewport.getBoundingClientRect();
    this._zoomAt(factor, r.left + r.width / 2, r.top + r.height / 2);
  }

  _bounds(ids) {
    let x0 = Infinity; let y0 = Infinity; let x1 = -Infinity; let y1 = -Infinity;
    for (const n of this.doc.nodes) {
      if (ids && !ids.has(n.id)) continue;
      const g = this.geom.get(n.id) || { w: 220, h: 100 };
      x0 = Math.min(x0, n.x); y0 = Math.min(y0, n.y);
      x1 = Math.max(x1, n.x + (g.w || 220)); y1 = Math.max(y1, n.y + (g.h || 100));
    }
    return x0 === Infinity ? null : { x0, y0, x1, y1 };
  }

  /** How much of the canvas's right side the floating inspector covers (narrow hosts; 0 when it does not float).
   * `selecting`: as it will be once a node is selected (it shows then, unless the user hid it). */
  _coveredRight(selecting = false) {
    if (!this.root.classList.contains("mge-narrow")) return 0;
    const vr = this.viewport.getBoundingClientRect();
    if (getComputedStyle(this.inspector).display === "none") {
      const hiddenUntilSelected = this.root.classList.contains("mge-nothing-selected")
        && !this.root.classList.contains("mge-hide-inspector");
      if (!selecting || !hiddenUntilSelected) return 0;
      const st = getComputedStyle(this.inspector);  // not laid out: its floating width and offset from the CSS
      const width = (parseFloat(st.width) || 260) + (parseFloat(st.right) || 8);
      return Math.max(0, Math.min(vr.width / 2, width + 8));
    }
    const ir = this.inspector.getBoundingClientRect();
    return Math.max(0, Math.min(vr.width / 2, vr.right - ir.left + 8));
  }

  /** A client point moved left where needed so that a node of `width` world units placed there (its top-left
   * corner near the point) lies on the visible canvas, not under the floating inspector (drops from the palette). */
  _visibleDropPoint(clientX, clientY, width = 220) {
    const vr = this.viewport.getBoundingClientRect();
    const right = vr.right - this._coveredRight(true) - 12;
    const x = Math.min(clientX, right - (width - 20) * this.view.z);
    return { x: Math.max(vr.left + 12, x), y: clientY };
  }

  /** Zoom and pan so that every node (or just the nodes in `ids`) is in view. */
  fitView(ids) {
    const w = this.viewport.clientWidth - this._coveredRight();  // Fit shows the nodes beside the inspector
    const hgt = this.viewport.clientHeight;
    if (!w || !hgt) { this.pendingFit = true; return; }
    this.pendingFit = false;
    const only = ids && [].concat(ids).length ? new Set([].concat(ids)) : null;
    const b = this._bounds(only);
    if (!b) { this.view = { x: 40, y: 40, z: 1 }; this._applyView(); return; }
    const pad = 40;
    const z = clamp(Math.min((w - 2 * pad) / (b.x1 - b.x0 || 1), (hgt - 2 * pad) / (b.y1 - b.y0 || 1)), 0.15, 1.2);
    this.view.z = z;
    this.view.x = (w - (b.x1 - b.x0) * z) / 2 - b.x0 * z;
    this.view.y = (hgt - (b.y1 - b.y0) * z) / 2 - b.y0 * z;
    this._applyView();
  }
}
