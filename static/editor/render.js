/* Rendering of the document: nodes (ports, summary, run state, issue badges), wires and global issues. */

const V = new URL(import.meta.url).search; // the entry's ?v=<version>: every module is fetched with it
const { TYPE_COLORS, RUN_STATES, clamp, formatValue } = await import(`./helpers.js${V}`);
const { h, svg } = await import(`./dom.js${V}`);
const { ADD_PORT } = await import(`./rules.js${V}`);

/** Methods of Editor (static/editor/index.js mixes them into its prototype). */
export default class RenderMethods {
  render() {
    const present = new Set();
    const changed = [];
    const issuesByNode = this._issuesByNode();
    const wiredIn = new Map();
    const wiredOut = new Map();
    for (const e of this.doc.edges) {
      if (!wiredIn.has(e.to)) wiredIn.set(e.to, []);
      wiredIn.get(e.to).push(e.in);
      if (!wiredOut.has(e.from)) wiredOut.set(e.from, []);
      wiredOut.get(e.from).push(e.out);
    }
    for (const n of this.doc.nodes) {
      present.add(n.id);
      let el = this.nodeEls.get(n.id);
      if (!el) {
        el = h("div", { class: "mge-node" });
        el._nodeId = n.id;
        this.nodeEls.set(n.id, el);
        this.nodeLayer.appendChild(el);
      }
      const sig = JSON.stringify([n.id, n.kind, n.model, n.params, n.raw, n.section, n.map, this._childPorts(n),
        (wiredIn.get(n.id) || []).sort(), [...new Set(wiredOut.get(n.id) || [])].sort(),
        issuesByNode.get(n.id) || null, this.runState[n.id] || null, (this.marks || {})[n.id] || null]);
      if (el._sig !== sig) {
        el._sig = sig;
        this._renderNode(el, n, issuesByNode.get(n.id) || []);
        changed.push(el);
      }
      const transform = `translate(${n.x}px, ${n.y}px)`;
      if (el._transform !== transform) { el.style.transform = transform; el._transform = transform; }
    }
    // measure after all DOM writes: one layout for the whole batch
    for (const el of changed) this._measure(el);
    if (changed.length && this.tip) this.tip.hidden = true; // its badge may have been replaced
    for (const [id, el] of [...this.nodeEls]) {
      if (!present.has(id)) { el.remove(); this.nodeEls.delete(id); this.geom.delete(id); }
    }
    this._applySelectionClasses();
    this._renderWires();
    this.emptyHint.hidden = this.doc.nodes.length > 0;
    this._updateToolbar();
    this._scheduleMinimap();
  }

  _issuesByNode() {
    const map = new Map();
    for (const issue of this.issues) {
      if (issue && issue.node_id && this.node(issue.node_id)) {
        if (!map.has(issue.node_id)) map.set(issue.node_id, []);
        map.get(issue.node_id).push(issue);
      }
    }
    return map;
  }

  _wiredInputs(id) { return this.doc.edges.filter((e) => e.to === id).map((e) => e.in).sort(); }
  _wiredOutputs(id) { return [...new Set(this.doc.edges.filter((e) => e.from === id).map((e) => e.out))].sort(); }

  _renderNode(el, n, issues) {
    const def = this.kindDef(n.kind);
    const run = this.runState[n.id] || null;
    const category = def ? def.category || "other" : "unknown";
    el.className = "mge-node";
    el.classList.add(`mge-cat-${String(category).replace(/[^a-z0-9_-]/gi, "")}`);
    if (!def) el.classList.add("mge-unknown");
    if (n.section) el.classList.add(`mge-io-${n.section}`);
    el.setAttribute("data-node-id", n.id);
    el.setAttribute("data-kind", n.kind);
    if (this.childChanged && this.childChanged.has(n.id)) el.classList.add("mge-child-changed");
    const mark = (this.marks || {})[n.id];
    if (mark) {
      el.classList.add(`mge-diff-${mark}`);
      el.setAttribute("data-diff", mark);
    } else el.removeAttribute("data-diff");
    const errors = issues.filter((i) => (i.severity || "error") === "error");
    if (errors.length) el.classList.add("mge-has-error");
    else if (issues.length) el.classList.add("mge-has-warning");
    if (run && RUN_STATES.includes(run.state)) {
      el.classList.add(`mge-state-${run.state}`);
      el.setAttribute("data-state", run.state);
    } else el.removeAttribute("data-state");
    el.textContent = "";

    const title = n.section ? n.params.name : (def ? def.title || def.kind : n.kind);
    const header = h("div", { class: "mge-node-header", title: def ? def.description || "" : `unknown kind ${n.kind}` }, [
      n.section ? h("span", { class: "mge-io-tag" }, n.section === "inputs" ? "input" : "output") : null,
      h("span", { class: "mge-node-title" }, title),
      n.section ? null : h("span", { class: "mge-node-id" }, n.id),
    ]);
    if (run && run.state) {
      header.appendChild(h("span", { class: "mge-state-badge", "data-testid": "state-badge" }, run.state));
    }
    if (issues.length) {
      const pop = h("div", { class: "mge-issue-pop" }, issues.map((i) => h("div", { class: "mge-issue-line" }, [
        h("b", {}, i.code ? `${i.code}: ` : ""), i.message || "",
        i.hint ? h("div", { class: "mge-issue-hint" }, `\u2192 ${i.hint}`) : null,
      ])));
      header.appendChild(h("span", {
        class: "mge-issue-badge", "data-testid": "issue-badge",
        title: issues.map((i) => `${i.message}${i.hint ? ` (${i.hint})` : ""}`).join("\n"),
      }, [String(issues.length), pop]));
    }
    el.appendChild(header);

    const ports = h("div", { class: "mge-ports" });
    const ins = this.inputPorts(n);
    const outs = this.outputPorts(n);
    if (def && def.variadic_inputs && !n.section) {
      ins.push({ name: ADD_PORT, type: "any", add: true, description: "drop a wire here to add an input" });
    }
    const wiredIn = new Set(this._wiredInputs(n.id));
    const badPorts = new Map(); // input port -> issue message (missing_input, type_mismatch, unknown_ref ...)
    for (const i of issues) {
      const m = /input '([^']+)'/.exec(i.message || "");
      if (m && !badPorts.has(m[1])) badPorts.set(m[1], i.message);
    }
    const wiredOut = new Set(this._wiredOutputs(n.id));
    const rows = Math.max(ins.length, outs.length);
    for (let i = 0; i < rows; i++) {
      const row = h("div", { class: "mge-port-row" });
      const pin = ins[i];
      if (pin) {
        const raw = n.raw && n.raw[pin.name];
        row.appendChild(h("div", {
          class: `mge-port mge-in${wiredIn.has(pin.name) ? " mge-wired" : ""}${pin.stale ? " mge-stale" : ""}` +
            `${pin.add ? " mge-add-port" : ""}${pin.extra ? " mge-extra" : ""}` +
            `${raw ? " mge-dangling" : ""}${pin.required && !wiredIn.has(pin.name) && !raw ? " mge-required" : ""}` +
            `${badPorts.has(pin.name) ? " mge-port-bad" : ""}`,
          "data-port": `in:${pin.name}`, "data-type": pin.type,
          title: `${pin.name}: ${pin.type}${pin.description ? ` \u2014 ${pin.description}` : ""}` +
            `${raw ? `\nwired to ${raw}, which does not exist` : ""}`,
        }, [h("span", { class: "mge-dot", style: `--c:${TYPE_COLORS[pin.type] || TYPE_COLORS.any}` }),
          h("span", { class: "mge-port-label" }, pin.add ? "+ input" : pin.variable ? `{${pin.name}}` : pin.name)]));
      } else row.appendChild(h("div", { class: "mge-port-spacer" }));
      const pout = outs[i];
      if (pout) {
        row.appendChild(h("div", {
          class: `mge-port mge-out${wiredOut.has(pout.name) ? " mge-wired" : ""}${pout.stale ? " mge-stale" : ""}`,
          "data-port": `out:${pout.name}`, "data-type": pout.type,
          title: `${pout.name}: ${pout.type}${pout.description ? ` \u2014 ${pout.description}` : ""}`,
        }, [h("span", { class: "mge-port-label" }, pout.name),
          h("span", { class: "mge-dot", style: `--c:${TYPE_COLORS[pout.type] || TYPE_COLORS.any}` })]));
      }
      ports.appendChild(row);
    }
    el.appendChild(ports);

    const summary = this._summaryRows(n, def);
    if (summary.length) {
      el.appendChild(h("div", { class: "mge-summary" }, summary.map(([k, v, set]) =>
        h("div", { class: `mge-summary-row${set ? " mge-set" : ""}` },
          [h("span", { class: "mge-k" }, k), h("span", { class: "mge-v" }, v)]))));
    }
    if (run) {
      if (run.state === "running" || typeof run.progress === "number" || run.tokens) {
        const pct = typeof run.progress === "number" ? clamp(run.progress, 0, 1) * 100 : null;
        el.appendChild(h("div", { class: "mge-progress" }, [
          h("div", { class: `mge-bar${pct === null ? " mge-indeterminate" : ""}`,
            style: pct === null ? "" : `width:${pct.toFixed(1)}%` }),
        ]));
        const bits = [];
        if (pct !== null) bits.push(`${Math.round(pct)}%`);
        if (run.tokens) bits.push(`${run.tokens} tok`);
        if (bits.length) el.appendChild(h("div", { class: "mge-run-meta", "data-testid": "run-meta" }, bits.join(" \u00b7 ")));
      }
      if (run.text && run.state === "running") {
        const text = String(run.text);
        el.appendChild(h("div", { class: "mge-preview", "data-testid": "node-preview" },
          text.length > 400 ? "\u2026" + text.slice(-400) : text));
      }
      if (run.state === "error" && run.message) {
        el.appendChild(h("div", { class: "mge-run-error", "data-testid": "node-error" }, String(run.message)));
      }
    }
  }

  _summaryRows(n, def) {
    const rows = [];
    if (n.section === "inputs") {
      rows.push(["type", n.params.type || "text", true]);
      if (n.params.default !== undefined && n.params.default !== null) rows.push(["default", formatValue(n.params.default, 34), true]);
      return rows;
    }
    if (n.section === "outputs" || !def) {
      if (!def && !n.section) rows.push(["kind", `unknown: ${n.kind || "(none)"}`, true]);
      return rows;
    }
    if (def.uses_model && n.model) rows.push(["model", n.model, true]);
    const resolved = this.resolvedParams(n);
    const params = this._paramsOf(def).filter((p) => this._paramVisible(p, resolved));
    const set = params.filter((p) => n.params && p.name in n.params);
    const unset = params.filter((p) => !(n.params && p.name in n.params) && p.default !== null && p.default !== "");
    for (const p of set.concat(unset).slice(0, 4)) rows.push([p.name, formatValue(resolved[p.name], 34), p.name in (n.params || {})]);
    return rows;
  }

  _measure(el) {
    const id = el._nodeId;
    const w = el.offsetWidth;
    const g = { w, h: el.offsetHeight, ports: {} };
    if (w) {
      for (const port of el.querySelectorAll("[data-port]")) {
        const dot = port.querySelector(".mge-dot");
        let x = dot.offsetWidth / 2;
        let y = dot.offsetHeight / 2;
        let cur = dot;
        while (cur && cur !== el) { x += cur.offsetLeft; y += cur.offsetTop; cur = cur.offsetParent; }
        g.ports[port.getAttribute("data-port")] = [x, y];
      }
    }
    this.geom.set(id, g);
  }

  _portPos(nodeId, key) {
    const n = this.node(nodeId);
    const g = this.geom.get(nodeId);
    if (!n) return null;
    const off = g && g.ports[key];
    if (!off) return { x: n.x + (key.startsWith("out:") ? (g && g.w) || 200 : 0), y: n.y + 20 };
    return { x: n.x + off[0], y: n.y + off[1] };
  }

  _wirePath(a, b) {
    const dx = Math.max(40, Math.abs(b.x - a.x) * 0.5);
    return `M${a.x},${a.y} C${a.x + dx},${a.y} ${b.x - dx},${b.y} ${b.x},${b.y}`;
  }

  _edgeKey(e) { return `${e.from}.${e.out}->${e.to}.${e.in}`; }

  _renderWires(onlyNodes) {
    const present = new Set();
    const outTypes = new Map();
    const outType = (id, port) => {
      if (!outTypes.has(id)) {
        const src = this.node(id);
        outTypes.set(id, new Map(src ? this.outputPorts(src).map((p) => [p.name, p.type]) : []));
      }
      return outTypes.get(id).get(port) || "any";
    };
    for (const e of this.doc.edges) {
      const key = this._edgeKey(e);
      present.add(key);
      if (onlyNodes && !onlyNodes.has(e.from) && !onlyNodes.has(e.to)) continue;
      let w = this.wireEls.get(key);
      if (!w) {
        const g = svg("g", { class: "mge-wire-group", "data-wire": key });
        const tip = svg("title", {});
        tip.textContent = `${e.from}.${e.out} \u2192 ${e.to}.${e.in}`;
        g.appendChild(tip);
        g._hit = g.appendChild(svg("path", { class: "mge-wire-hit", d: "" }));
        g._path = g.appendChild(svg("path", { class: "mge-wire", d: "" }));
        g._edge = e;
        this.wireLayer.appendChild(g);
        w = g;
        this.wireEls.set(key, w);
      }
      w._edge = e;
      const a = this._portPos(e.from, `out:${e.out}`);
      const b = this._portPos(e.to, `in:${e.in}`);
      if (!a || !b) continue;
      const d = this._wirePath(a, b);
      if (w._d !== d) { w._hit.setAttribute("d", d); w._path.setAttribute("d", d); w._d = d; }
      const stroke = TYPE_COLORS[outType(e.from, e.out)] || TYPE_COLORS.any;
      if (w._stroke !== stroke) { w._path.style.stroke = stroke; w._stroke = stroke; }
      const runFrom = this.runState[e.from];
      w.classList.toggle("mge-flowing", Boolean(runFrom && runFrom.state === "done" &&
        this.runState[e.to] && this.runState[e.to].state === "running"));
      w.classList.toggle("mge-selected", this.selectedWire === key);
    }
    if (!onlyNodes) {
      for (const [key, w] of [...this.wireEls]) if (!present.has(key)) { w.remove(); this.wireEls.delete(key); }
    }
  }

  _applySelectionClasses() {
    for (const [id, el] of this.nodeEls) el.classList.toggle("mge-selected", this.selection.has(id));
    for (const [key, w] of this.wireEls) w.classList.toggle("mge-selected", this.selectedWire === key);
    this._updateToolbar();
  }

  _renderGlobalIssues() {
    const global_ = this.issues.filter((i) => i && (!i.node_id || !this.node(i.node_id)));
    this.globalIssues.textContent = "";
    this.globalIssues.hidden = global_.length === 0;
    for (const i of global_) {
      this.globalIssues.appendChild(h("div", { class: `mge-global-issue mge-${i.severity || "error"}` }, [
        h("b", {}, `${i.line ? `line ${i.line}: ` : ""}${i.node_id ? `[${i.node_id}] ` : ""}`), i.message || "",
        i.hint ? h("span", { class: "mge-issue-hint" }, ` \u2192 ${i.hint}`) : null,
      ]));
    }
  }
}
