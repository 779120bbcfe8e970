/* Pointer interaction: pan, select, rubber band, drag nodes and wires, double-click, context menus, wheel zoom. */

const V = new URL(import.meta.url).search; // the entry's ?v=<version>: every module is fetched with it
const { shared, clamp } = await import(`./helpers.js${V}`);
const { h } = await import(`./dom.js${V}`);
const { ADD_PORT, portCompatible } = await import(`./rules.js${V}`);

/** Methods of Editor (static/editor/index.js mixes them into its prototype). */
export default class PointerMethods {
  _onPointerDown(e) {
    if (this.drag) return;
    this.root.focus({ preventScroll: true });
    if (!this.quick.hidden && !this.quick.contains(e.target)) this.closeQuickAdd();
    const target = e.target;
    if (target.closest(".mge-global-issues, .mge-toast")) return;
    const portEl = target.closest("[data-port]");
    const nodeEl = target.closest(".mge-node");
    const wireEl = target.closest(".mge-wire-group");
    const panGesture = e.button === 1 || (e.button === 0 && this.spaceDown);
    if (panGesture || (e.button === 0 && !nodeEl && !wireEl && !e.shiftKey && !e.ctrlKey && !e.metaKey)) {
      if (this.spaceDown) this.spaceUsed = true;
      this._startDrag(e, { type: "pan", sx: e.clientX, sy: e.clientY, vx: this.view.x, vy: this.view.y, moved: false });
      return;
    }
    if (e.button !== 0) return;
    e.preventDefault();
    if (portEl && nodeEl && !this.readOnly) { // a past version: no wire may be drawn (ports select the node)
      this._startWireDrag(e, nodeEl._nodeId, portEl.getAttribute("data-port"));
      return;
    }
    if (nodeEl) {
      const id = nodeEl._nodeId;
      if (e.shiftKey || e.ctrlKey || e.metaKey) {
        if (this.selection.has(id)) this.selection.delete(id); else this.selection.add(id);
      } else if (!this.selection.has(id)) {
        this.selection = new Set([id]);
      }
      this.selectedWire = null;
      this._applySelectionClasses();
      this._renderInspector();
      this._emitSelect();
      if (!this.selection.has(id)) return;
      if (this.readOnly) { // a past version: selected and inspected, never moved (moves bypass mutate)
        if (this.selection.size === 1) this._reveal(id);
        return;
      }
      let dragId = id;
      if (e.altKey) {
        // Alt+drag: drag a copy, leave the originals where they are
        const originals = this.doc.nodes.filter((n) => this.selection.has(n.id)).map((n) => n.id);
        const saved = shared.clipboard;
        this.copySelection(true);
        const copies = this.paste(null, true);
        shared.clipboard = saved;
        dragId = copies[originals.indexOf(id)] || id;
      }
      const start = new Map([...this.selection].map((sid) => { const n = this.node(sid); return [sid, { x: n.x, y: n.y }]; }));
      this._startDrag(e, { type: "move", sx: e.clientX, sy: e.clientY, start, before: this._snapshot(), moved: false,
        clickId: dragId, additive: e.shiftKey || e.ctrlKey || e.metaKey });
      return;
    }
    if (wireEl) {
      this.selectedWire = wireEl.getAttribute("data-wire");
      this.selection.clear();
      this._applySelectionClasses();
      this._renderInspector();
      this._emitSelect();
      return;
    }
    // Shift/Ctrl + drag on the background: rubber band
    const p = this.toWorld(e.clientX, e.clientY);
    this._startDrag(e, { type: "band", sx: e.clientX, sy: e.clientY, wx: p.x, wy: p.y,
      base: new Set(this.selection), moved: false });
  }

  _startDrag(e, drag) {
    this.drag = drag;
    drag.pointerId = e.pointerId;
    try { this.viewport.setPointerCapture(e.pointerId); } catch (_err) { /* synthetic events */ }
    this.viewport.classList.add(`mge-dragging-${drag.type}`);
  }

  _startWireDrag(e, nodeId, portKey) {
    const [dir, port] = [portKey.slice(0, portKey.indexOf(":")), portKey.slice(portKey.indexOf(":") + 1)];
    let drag;
    if (dir === "out") {
      drag = { type: "wire", from: nodeId, out: port, anchor: this._portPos(nodeId, portKey), reverse: false };
    } else {
      const existing = this.doc.edges.find((e2) => e2.to === nodeId && e2.in === port);
      if (existing) {
        // pick up the wire: drop it elsewhere to re-route, on empty canvas to disconnect
        drag = { type: "wire", from: existing.from, out: existing.out, anchor: this._portPos(existing.from, `out:${existing.out}`),
          reverse: false, detached: this._edgeKey(existing), before: this._snapshot() };
        this.doc.edges = this.doc.edges.filter((x) => x !== existing);
        this._renderWires();
        this.render();
      } else {
        drag = { type: "wire", to: nodeId, in: port, anchor: this._portPos(nodeId, portKey), reverse: true };
      }
    }
    this._startDrag(e, drag);
    this._updateTempWire(e.clientX, e.clientY);
    this._highlightTargets(drag);
  }

  /** Mark the ports the dragged wire may be dropped on. */
  _highlightTargets(drag) {
    // the rules of checkConnection, computed once for the whole canvas: the nodes a wire from `from`
    // may not enter (itself and its ancestors), or that may not feed `to` (itself and its descendants)
    const anchor = drag.reverse ? drag.to : drag.from;
    const next = new Map();
    for (const e of this.doc.edges) {
      const [a, b] = drag.reverse ? [e.from, e.to] : [e.to, e.from];
      if (!next.has(a)) next.set(a, []);
      next.get(a).push(b);
    }
    const blocked = new Set([anchor]);
    const stack = [anchor];
    while (stack.length) for (const n of next.get(stack.pop()) || []) if (!blocked.has(n)) { blocked.add(n); stack.push(n); }
    const anchorNode = this.node(anchor);
    const ports = anchorNode ? (drag.reverse ? this.inputPorts(anchorNode) : this.outputPorts(anchorNode)) : [];
    const own = ports.find((p) => p.name === (drag.reverse ? drag.in : drag.out));
    const ownType = own ? own.type : "any";
    const want = drag.reverse ? "out:" : "in:";
    for (const [id, el] of this.nodeEls) {
      const free = !blocked.has(id);
      for (const portEl of el.querySelectorAll("[data-port]")) {
        const key = portEl.getAttribute("data-port");
        const type = portEl.getAttribute("data-type") || "any";
        const ok = free && key.startsWith(want) &&
          (drag.reverse ? portCompatible(type, ownType, this.rules) : portCompatible(ownType, type, this.rules));
        portEl.classList.toggle("mge-target-ok", ok);
      }
    }
    this.root.classList.add("mge-wiring");
  }

  _buildAdjacency() {
    const succ = new Map();
    for (const e of this.doc.edges) {
      if (!succ.has(e.from)) succ.set(e.from, []);
      succ.get(e.from).push(e.to);
    }
    return succ;
  }

  _clearTargets() {
    this.root.classList.remove("mge-wiring");
    for (const el of this.root.querySelectorAll(".mge-target-ok")) el.classList.remove("mge-target-ok");
  }

  _updateTempWire(clientX, clientY) {
    const d = this.drag;
    const p = this.toWorld(clientX, clientY);
    this.tempWire.setAttribute("d", d.reverse ? this._wirePath(p, d.anchor) : this._wirePath(d.anchor, p));
  }

  /** While a node, wire or band drag is near the canvas edge, keep panning towards it. */
  _autoPan(e) {
    const d = this.drag;
    if (!d || d.type === "pan") return;
    const r = this.viewport.getBoundingClientRect();
    const edge = 28;
    const speed = (dist) => (dist < edge ? Math.ceil((edge - dist) / 3) : 0);
    d.autoPan = { dx: speed(e.clientX - r.left) - speed(r.right - e.clientX),
      dy: speed(e.clientY - r.top) - speed(r.bottom - e.clientY), e };
    if ((d.autoPan.dx || d.autoPan.dy) && !d.autoPanTimer) {
      const step = () => {
        const cur = this.drag;
        if (cur !== d || !d.autoPan || (!d.autoPan.dx && !d.autoPan.dy)) { d.autoPanTimer = null; return; }
        this.view.x += d.autoPan.dx;
        this.view.y += d.autoPan.dy;
        if (d.type === "move") { d.sx += d.autoPan.dx; d.sy += d.autoPan.dy; }
        if (d.type === "band") { d.sx += d.autoPan.dx; d.sy += d.autoPan.dy; }
        this._applyView();
        this._dragTo(d.autoPan.e);
        d.autoPanTimer = setTimeout(step, 16);
      };
      d.autoPanTimer = setTimeout(step, 16);
    }
  }

  _onPointerMove(e) {
    this.mouse.x = e.clientX;
    this.mouse.y = e.clientY;
    const d = this.drag;
    if (!d || e.pointerId !== d.pointerId) return;
    this._autoPan(e);
    this._dragTo(e);
  }

  _dragTo(e) {
    const d = this.drag;
    if (!d) return;
    if (d.type === "pan") {
      d.moved = d.moved || Math.hypot(e.clientX - d.sx, e.clientY - d.sy) > 3;
      this.view.x = d.vx + (e.clientX - d.sx);
      this.view.y = d.vy + (e.clientY - d.sy);
      this._applyView();
    } else if (d.type === "move") {
      const dx = (e.clientX - d.sx) / this.view.z;
      const dy = (e.clientY - d.sy) / this.view.z;
      if (!d.moved && Math.hypot(e.clientX - d.sx, e.clientY - d.sy) < 3) return;
      d.moved = true;
      for (const [id, s] of d.start) {
        const n = this.node(id);
        n.x = Math.round(s.x + dx);
        n.y = Math.round(s.y + dy);
        const el = this.nodeEls.get(id);
        if (el) { el._transform = `translate(${n.x}px, ${n.y}px)`; el.style.transform = el._transform; }
      }
      this._renderWires(new Set(d.start.keys()));
      this._scheduleMinimap();
    } else if (d.type === "wire") {
      this._updateTempWire(e.clientX, e.clientY);
    } else if (d.type === "band") {
      d.moved = true;
      const p = this.toWorld(e.clientX, e.clientY);
      const r = this.viewport.getBoundingClientRect();
      const x0 = Math.min(d.sx, e.clientX) - r.left; const y0 = Math.min(d.sy, e.clientY) - r.top;
      Object.assign(this.band.style, { left: `${x0}px`, top: `${y0}px`,
        width: `${Math.abs(e.clientX - d.sx)}px`, height: `${Math.abs(e.clientY - d.sy)}px` });
      this.band.hidden = false;
      const bx0 = Math.min(d.wx, p.x); const bx1 = Math.max(d.wx, p.x);
      const by0 = Math.min(d.wy, p.y); const by1 = Math.max(d.wy, p.y);
      const sel = new Set(d.base);
      for (const n of this.doc.nodes) {
        const g = this.geom.get(n.id) || { w: 200, h: 100 };
        if (n.x < bx1 && n.x + g.w > bx0 && n.y < by1 && n.y + g.h > by0) sel.add(n.id);
      }
      this.selection = sel;
      this._applySelectionClasses();
    }
  }

  _onPointerUp(e) {
    const d = this.drag;
    if (!d || e.pointerId !== d.pointerId) return;
    this.drag = null;
    try { this.viewport.releasePointerCapture(e.pointerId); } catch (_err) { /* already released */ }
    this.viewport.classList.remove(`mge-dragging-${d.type}`);
    if (d.type === "pan") {
      if (!d.moved && e.button === 0 && !this.spaceDown) {
        // a click on the background clears the selection
        if (this.selection.size || this.selectedWire) {
          this.selection.clear();
          this.selectedWire = null;
          this._applySelectionClasses();
          this._renderInspector();
          this._emitSelect();
        }
      }
    } else if (d.type === "move") {
      if (d.moved) {
        if (d.before !== this._snapshot()) { this._pushUndo(d.before, "move"); this.coalesceKey = null; this._notifyChange(); }
        this.render();
      } else {
        if (!d.additive && this.selection.size > 1) {
          this.selection = new Set([d.clickId]);
          this._applySelectionClasses();
          this._renderInspector();
          this._emitSelect();
        }
        if (this.selection.size === 1) this._reveal(d.clickId);
      }
    } else if (d.type === "wire") {
      this.tempWire.setAttribute("d", "");
      this._clearTargets();
      this._finishWire(d, e);
    } else if (d.type === "band") {
      this.band.hidden = true;
      this._renderInspector();
      this._emitSelect();
    }
  }

  _finishWire(d, e) {
    const hit = document.elementFromPoint(e.clientX, e.clientY);
    const portEl = hit && hit.closest && hit.closest("[data-port]");
    const nodeEl = portEl && portEl.closest(".mge-node");
    const restore = () => {
      if (d.detached) { this.doc = JSON.parse(d.before); this.render(); }
    };
    if (!portEl || !nodeEl || !this.root.contains(nodeEl)) {
      const onCanvas = hit && this.viewport.contains(hit) && !hit.closest(".mge-node, .mge-global-issues, .mge-toast");
      if (!d.detached && onCanvas) {
        const type = d.reverse ? (this.inputPorts(this.node(d.to)).find((p) => p.name === d.in) || {}).type
          : (this.outputPorts(this.node(d.from)).find((p) => p.name === d.out) || {}).type;
        this.openQuickAdd(e.clientX, e.clientY, d.reverse ? { to: d.to, in: d.in, type: type || "any" }
          : { from: d.from, out: d.out, type: type || "any" });
        return;
      }
      if (d.detached) {
        // dropped on nothing: the wire is removed (one undoable step)
        const now = this._snapshot();
        this.doc = JSON.parse(d.before);
        this.mutate("disconnect", () => { this.doc = JSON.parse(now); });
        this.render();
      }
      return;
    }
    const key = portEl.getAttribute("data-port");
    const dir = key.slice(0, key.indexOf(":"));
    let port = key.slice(key.indexOf(":") + 1);
    const id = nodeEl._nodeId;
    if (!d.reverse && dir === "in") {
      if (d.detached) restore();
      if (d.detached && `${d.from}.${d.out}->${id}.${port}` === d.detached) return;
      if (d.detached) {
        const problem = this.checkConnection(d.from, d.out, id, port);
        if (problem) { this.message(problem, "error"); return; }
        const detached = d.detached;
        if (port === ADD_PORT) port = this._newPortName(d.from, d.out, id);
        this.mutate("reconnect", () => {
          this.doc.edges = this.doc.edges.filter((x) => this._edgeKey(x) !== detached);
          const i = this.doc.edges.findIndex((x) => x.to === id && x.in === port);
          const edge = { from: d.from, out: d.out, to: id, in: port };
          if (i >= 0) this.doc.edges[i] = edge; else this.doc.edges.push(edge);
        });
        return;
      }
      this.connect(d.from, d.out, id, port);
    } else if (d.reverse && dir === "out") {
      this.connect(id, port, d.to, d.in);
    } else {
      restore();
      if (!(d.reverse ? d.to === id : d.from === id)) {
        this.message(d.reverse ? "drop the wire on an output port (right side of a node)"
          : "drop the wire on an input port (left side of a node)", "warning");
      }
    }
  }

  _onDblClick(e) {
    // pointer capture during the clicks retargets dblclick to the viewport: look at what is under the pointer
    const under = (e.clientX !== undefined && document.elementFromPoint(e.clientX, e.clientY)) || e.target;
    const target = this.root.contains(under) ? under : e.target;
    const nodeEl = target.closest(".mge-node");
    if (nodeEl && !target.closest("[data-port]")) {
      e.preventDefault();
      if (this._openChild(nodeEl._nodeId)) return; // a workflow node: the host opens its child
      // double-click a node: rename it in the inspector
      this.select(nodeEl._nodeId);
      this._emitSelect();
      const field = this.inspector.querySelector('[data-testid="inspector-id"]');
      if (field) { this.togglePanel("inspector", true); field.focus(); field.select(); }
      return;
    }
    if (target.closest(".mge-node, .mge-wire-group, .mge-global-issues, .mge-toast")) return;
    e.preventDefault();
    this.openQuickAdd(e.clientX, e.clientY);
  }

  /** Right-click menu: node actions on a node, wire actions on a wire, canvas actions elsewhere. */
  _onContextMenu(e) {
    e.preventDefault();
    if (this.drag) return;
    const nodeEl = e.target.closest(".mge-node");
    const wireEl = e.target.closest(".mge-wire-group");
    const at = this.toWorld(e.clientX, e.clientY);
    let items;
    if (nodeEl) {
      const id = nodeEl._nodeId;
      if (!this.selection.has(id)) this.select(id);
      this._emitSelect();
      const many = this.selection.size > 1;
      items = [
        ["rename", "Rename…", !many, () => this._onDblClick({ target: nodeEl, preventDefault() {} })],
        ["duplicate", many ? "Duplicate nodes" : "Duplicate", true, () => { if (this.copySelection()) this.paste(); }],
        ["copy", "Copy", true, () => this.copySelection()],
        ["disconnect", "Disconnect all wires", this.doc.edges.some((x) => this.selection.has(x.from) || this.selection.has(x.to)),
          () => {
            const ids = new Set(this.selection);
            this.mutate("disconnect", () => { this.doc.edges = this.doc.edges.filter((x) => !ids.has(x.from) && !ids.has(x.to)); });
          }],
        ["delete", many ? "Delete nodes" : "Delete", true, () => this.deleteSelection()],
      ];
    } else if (wireEl) {
      const key = wireEl.getAttribute("data-wire");
      items = [["disconnect", "Delete wire", true, () => this.disconnect(key)]];
    } else {
      items = [
        ["add", "Add node here…", true, () => this.openQuickAdd(e.clientX, e.clientY)],
        ["paste", "Paste", Boolean(shared.clipboard), () => this.paste(at)],
        ["select-all", "Select all", this.doc.nodes.length > 0, () => { this.select(this.doc.nodes.map((n) => n.id)); this._emitSelect(); }],
        ["layout", "Auto-layout", this.doc.nodes.length > 0, () => this.autoLayout()],
        ["fit", "Fit to view", true, () => this.fitView()],
      ];
    }
    this._showMenu(e.clientX, e.clientY, items);
  }

  _showMenu(clientX, clientY, items) {
    this._closeMenu();
    const menu = h("div", { class: "mge-menu", role: "menu", "data-testid": "context-menu" });
    for (const [action, label, enabled, fn] of items) {
      menu.appendChild(h("button", {
        type: "button", class: "mge-menu-item", role: "menuitem", "data-action": action, disabled: !enabled,
        onpointerdown: (ev) => ev.stopPropagation(),
        onclick: (ev) => { ev.preventDefault(); this._closeMenu(); fn(); },
      }, label));
    }
    const rr = this.root.getBoundingClientRect();
    this.root.appendChild(menu);
    menu.style.left = `${clamp(clientX - rr.left, 2, Math.max(2, rr.width - menu.offsetWidth - 2))}px`;
    menu.style.top = `${clamp(clientY - rr.top, 2, Math.max(2, rr.height - menu.offsetHeight - 2))}px`;
    this.menu = menu;
    this._menuAway = (ev) => { if (!menu.contains(ev.target)) this._closeMenu(); };
    document.addEventListener("pointerdown", this._menuAway, true);
  }

  _closeMenu() {
    if (!this.menu) return;
    this.menu.remove();
    this.menu = null;
    document.removeEventListener("pointerdown", this._menuAway, true);
  }

  _onWheel(e) {
    if (e.target.closest(".mge-preview") && !e.ctrlKey) return;
    e.preventDefault();
    const delta = e.deltaMode === 1 ? e.deltaY * 16 : e.deltaY;
    this._zoomAt(Math.exp(-delta * 0.0015), e.clientX, e.clientY);
  }
}
