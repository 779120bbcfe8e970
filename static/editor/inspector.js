/* The inspector: fields of the selected node, workflow input/output, or the workflow itself. */

const V = new URL(import.meta.url).search; // the entry's ?v=<version>: every module is fetched with it
const { formatValue } = await import(`./helpers.js${V}`);
const { h } = await import(`./dom.js${V}`);
const { INPUT_TYPES, NAME_RE, templateVariables } = await import(`./rules.js${V}`);

/** Methods of Editor (static/editor/index.js mixes them into its prototype). */
export default class InspectorMethods {
  _emitSelect() {
    const id = this.selection.size === 1 ? [...this.selection][0] : null;
    if (id === this._lastEmitted) return;
    this._lastEmitted = id;
    if (this.opts.onSelect) {
      try { this.opts.onSelect(id); } catch (err) { console.warn("metagen editor onSelect:", err); }
    }
  }

  /** Rebuild the inspector for the selection; `unlessTyping` skips it while a field of it has focus. */
  _renderInspector(unlessTyping) {
    this.root.classList.toggle("mge-nothing-selected", this.selection.size === 0);
    if (unlessTyping && this.inspector.contains(document.activeElement)) return;
    const box = this.inspector;
    box.textContent = "";
    if (this.selection.size > 1) {
      box.appendChild(h("div", { class: "mge-panel-title" }, `${this.selection.size} nodes selected`));
      box.appendChild(h("div", { class: "mge-muted" },
        "Drag to move them together; Ctrl+C / Ctrl+V copies, Delete removes."));
      return;
    }
    if (this.selection.size === 0) { this._renderWorkflowInspector(box); return; }
    const id = [...this.selection][0];
    const n = this.node(id);
    if (!n) return;
    const def = this.kindDef(n.kind);
    box.appendChild(h("div", { class: "mge-panel-title" },
      n.section === "inputs" ? "Workflow input" : n.section === "outputs" ? "Workflow output"
        : `${def ? def.title || def.kind : n.kind}`));
    if (def && def.description) box.appendChild(h("div", { class: "mge-desc" }, def.description));
    if (!def) box.appendChild(h("div", { class: "mge-field-error" }, `Unknown node kind "${n.kind}".`));
    const issues = this.issues.filter((i) => i && i.node_id === id);
    if (issues.length) {
      box.appendChild(h("div", { class: "mge-inspector-issues" }, issues.map((i) =>
        h("div", { class: `mge-global-issue mge-${i.severity || "error"}` }, [
          i.message || "", i.hint ? h("div", { class: "mge-issue-hint" }, `\u2192 ${i.hint}`) : null]))));
    }
    if (n.section) { this._renderIoInspector(box, n); return; }

    // id
    const idInput = h("input", { type: "text", class: "mge-input", value: n.id, "data-testid": "inspector-id",
      spellcheck: "false", "aria-label": "Node id" });
    const idErr = h("div", { class: "mge-field-error", "data-error-for": "id" });
    const applyId = () => {
      const cur = [...this.selection][0];
      const problem = this.renameNode(cur, idInput.value.trim());
      idErr.textContent = problem || "";
      idInput.classList.toggle("mge-invalid", Boolean(problem));
      if (!problem) this._emitSelect();
    };
    idInput.addEventListener("input", () => {
      const v = idInput.value.trim();
      const cur = [...this.selection][0];
      let problem = null;
      if (!this.rules.nodeId.test(v)) problem = "letters, digits, _ and - only; start with a letter or _";
      else if (this.rules.reservedIds.includes(v)) problem = `"${v}" is reserved`;
      else if (v !== cur && this.node(v)) problem = `another node is called "${v}"`;
      idErr.textContent = problem || "";
      idInput.classList.toggle("mge-invalid", Boolean(problem));
    });
    idInput.addEventListener("change", applyId);
    idInput.addEventListener("keydown", (ev) => { if (ev.key === "Enter") { ev.preventDefault(); applyId(); } });
    box.appendChild(this._field("id", "Unique name of this node; wires refer to it.", idInput, idErr));

    if (def && def.uses_model) {
      const aliases = [...new Set([...(this.opts.models || []), ...Object.keys(this.doc.meta.models || {})])];
      if (n.model && !aliases.includes(n.model)) aliases.push(n.model);
      const sel = h("select", { class: "mge-input", "data-testid": "inspector-model", "data-param": "__model" },
        [h("option", { value: "" }, aliases.length ? `default (${aliases[0]})` : "default model")]
          .concat(aliases.map((a) => h("option", { value: a, selected: n.model === a }, a))));
      sel.addEventListener("change", () => this.setModel(id, sel.value));
      box.appendChild(this._field("model", "Which model this node uses.", sel));
    }
    if (!def) return;
    const resolved = this.resolvedParams(n);
    const fields = h("div", { class: "mge-fields" });
    box.appendChild(fields);
    const paint = () => {
      const res = this.resolvedParams(this.node(id) || n);
      for (const f of fields.children) {
        const p = f._param;
        if (p) f.hidden = !this._paramVisible(p, res);
      }
    };
    for (const p of this._paramsOf(def)) {
      const f = this._paramField(id, p, resolved[p.name], n.params && p.name in n.params, paint);
      f._param = p;
      fields.appendChild(f);
    }
    // validation issues about a param ("param 'n' must be ...") show under that field too
    for (const i of issues) {
      const m = /param '([^']+)'/.exec(i.message || "");
      const err = m && fields.querySelector(`[data-error-for="${CSS.escape(m[1])}"]`);
      if (err && !err.textContent) err.textContent = `${i.message}${i.hint ? ` \u2014 ${i.hint}` : ""}`;
    }
    paint();
  }

  _field(label, help, control, extra) {
    return h("label", { class: "mge-field" }, [
      h("span", { class: "mge-label", title: help || "" }, label), control,
      help ? h("span", { class: "mge-help" }, help) : null, extra || null,
    ]);
  }

  _paramField(id, p, value, isSet, repaint) {
    const err = h("div", { class: "mge-field-error", "data-error-for": p.name });
    const key = `param:${id}:${p.name}`;
    let control;
    let extra = null;
    const apply = (v, coalesce) => {
      this.setParam(id, p.name, v, coalesce);
      repaint();
      reset.hidden = !(this.node(id) && p.name in (this.node(id).params || {}));
    };
    const fail = (msg) => { err.textContent = msg || ""; control.classList.toggle("mge-invalid", Boolean(msg)); };
    const reset = h("button", { type: "button", class: "mge-reset", title: `Reset to default (${formatValue(p.default, 40)})`,
      "data-reset": p.name, hidden: !isSet }, "reset");
    const range = [p.min !== null && p.min !== undefined ? `\u2265 ${p.min}` : null,
      p.max !== null && p.max !== undefined ? `\u2264 ${p.max}` : null].filter(Boolean).join(", ");
    if (p.type === "int" || p.type === "float") {
      control = h("input", { type: "number", class: "mge-input", "data-param": p.name,
        value: value === null || value === undefined ? "" : String(value),
        min: p.min ?? undefined, max: p.max ?? undefined, step: p.type === "int" ? "1" : "any",
        placeholder: p.default === null || p.default === undefined ? "" : String(p.default) });
      control.addEventListener("input", () => {
        const raw = control.value.trim();
        if (control.validity && control.validity.badInput) { fail("not a number"); return; }
        if (raw === "") {
          if (p.required && (p.default === null || p.default === undefined)) { fail("required"); return; }
          fail(null); apply(undefined, key); return;
        }
        const num = Number(raw);
        if (!Number.isFinite(num) || (control.validity && control.validity.badInput)) { fail("not a number"); return; }
        if (p.type === "int" && !Number.isInteger(num)) { fail("must be a whole number"); return; }
        if (p.min !== null && p.min !== undefined && num < p.min) { fail(`must be \u2265 ${p.min}`); return; }
        if (p.max !== null && p.max !== undefined && num > p.max) { fail(`must be \u2264 ${p.max}`); return; }
        fail(null);
        apply(num, key);
      });
    } else if (p.type === "bool") {
      control = h("input", { type: "checkbox", class: "mge-check", "data-param": p.name, checked: Boolean(value) });
      control.addEventListener("change", () => apply(control.checked));
    } else if (p.type === "choice") {
      const choices = (p.choices || []).slice();
      if (value !== null && value !== undefined && !choices.includes(value)) choices.push(value);
      control = h("select", { class: "mge-input", "data-param": p.name },
        (p.default === null || p.default === undefined ? [h("option", { value: "" }, "\u2014")] : [])
          .concat(choices.map((c) => h("option", { value: c, selected: c === value }, c))));
      control.addEventListener("change", () => apply(control.value === "" ? undefined : control.value));
    } else if (p.type === "text") {
      control = h("textarea", { class: "mge-input mge-text", "data-param": p.name, rows: "5", spellcheck: "false" });
      control.value = value === null || value === undefined ? "" : String(value);
      const vars = h("div", { class: "mge-vars", "data-vars-for": p.name });
      const showVars = () => {
        vars.textContent = "";
        const names = templateVariables(control.value, this.rules);
        vars.appendChild(h("span", { class: "mge-muted" }, names.length ? "uses " : "no {variables}"));
        const node = this.node(id);
        const def = node && this.kindDef(node.kind);
        const reserved = new Set((def && def.reserved_vars) || this.rules.reservedVars);
        const wired = new Set(this.doc.edges.filter((x) => x.to === id).map((x) => x.in));
        for (const v of names) {
          const own = def && def.variadic_inputs && reserved.has(v) && !(def.inputs || []).some((q) => q.name === v);
          const state = own ? "own" : wired.has(v) ? "wired" : "unwired";
          vars.appendChild(h("span", { class: `mge-chip mge-chip-${state}`, "data-var": v, "data-var-state": state,
            title: state === "own" ? "filled in by the node itself" : state === "wired" ? "connected"
              : "not connected yet: wire an output into this input" }, `{${v}}`));
        }
      };
      showVars();
      control.addEventListener("input", () => {
        showVars();
        if (p.required && !control.value) { fail("required"); return; }
        fail(null);
        apply(control.value, key);
      });
      extra = vars;
    } else if (p.type === "list") {
      control = h("textarea", { class: "mge-input", "data-param": p.name, rows: "3", spellcheck: "false",
        placeholder: "one item per line" });
      control.value = Array.isArray(value) ? value.join("\n") : value === null || value === undefined ? "" : String(value);
      control.addEventListener("input", () => {
        const items = control.value.split("\n").map((s) => s.trim()).filter((s) => s !== "");
        apply(items.length ? items : [], key);
      });
    } else if (p.type === "json") {
      control = h("textarea", { class: "mge-input mge-mono", "data-param": p.name, rows: "3", spellcheck: "false",
        placeholder: "JSON, e.g. {\"regex\": \"Answer: (\\\\d+)\"}" });
      control.value = value === null || value === undefined ? "" : JSON.stringify(value, null, 1);
      control.addEventListener("input", () => {
        const raw = control.value.trim();
        if (raw === "") { fail(null); apply(undefined, key); return; }
        try { const v = JSON.parse(raw); fail(null); apply(v, key); } catch (ex) { fail(`invalid JSON: ${ex.message}`); }
      });
    } else {
      control = h("input", { type: "text", class: "mge-input", "data-param": p.name,
        value: value === null || value === undefined ? "" : String(value) });
      control.addEventListener("input", () => {
        if (p.required && !control.value) { fail("required"); return; }
        fail(null); apply(control.value === "" && !p.required ? undefined : control.value, key);
      });
    }
    control.addEventListener("blur", () => { if (this.coalesceKey === key) this.coalesceKey = null; });
    reset.addEventListener("click", (ev) => {
      ev.preventDefault();
      this.setParam(id, p.name, undefined);
      this._renderInspector();
    });
    const label = h("span", { class: "mge-label", title: p.description || "" },
      [p.name, p.required ? h("span", { class: "mge-req" }, " *") : null,
        range ? h("span", { class: "mge-range" }, ` (${range})`) : null, reset]);
    const wrap = h("div", { class: `mge-field mge-field-${p.type}`, "data-field": p.name }, [
      label, p.type === "bool" ? h("label", { class: "mge-checkline" }, [control, " ", p.description || p.name]) : control,
      extra, p.description && p.type !== "bool" ? h("span", { class: "mge-help" }, p.description) : null, err]);
    return wrap;
  }

  _renderIoInspector(box, n) {
    const id = n.id;
    const nameInput = h("input", { type: "text", class: "mge-input", value: n.params.name, "data-param": "name",
      "data-testid": "inspector-id", spellcheck: "false" });
    const nameErr = h("div", { class: "mge-field-error", "data-error-for": "name" });
    const applyName = () => {
      const cur = [...this.selection][0] || id;
      const problem = this.setParam(cur, "name", nameInput.value.trim());
      nameErr.textContent = problem || "";
      nameInput.classList.toggle("mge-invalid", Boolean(problem));
    };
    nameInput.addEventListener("input", () => {
      const v = nameInput.value.trim();
      const cur = this.node([...this.selection][0] || id);
      let problem = null;
      if (!NAME_RE.test(v)) problem = "letters, digits and _ only; start with a letter or _";
      else if (cur && v !== cur.params.name && this._takenNames(cur.section).has(v)) problem = `"${v}" is taken`;
      nameErr.textContent = problem || "";
      nameInput.classList.toggle("mge-invalid", Boolean(problem));
    });
    nameInput.addEventListener("change", applyName);
    nameInput.addEventListener("keydown", (ev) => { if (ev.key === "Enter") { ev.preventDefault(); applyName(); } });
    box.appendChild(this._field("name", n.section === "inputs" ? "Referenced as inputs.<name>; in prompts as {name}."
      : "The name of this result.", nameInput, nameErr));
    if (n.section !== "inputs") return;
    const cur = () => this.node([...this.selection][0] || id);
    const typeSel = h("select", { class: "mge-input", "data-param": "type" },
      INPUT_TYPES.map((t) => h("option", { value: t, selected: (n.params.type || "text") === t }, t)));
    typeSel.addEventListener("change", () => {
      this.setParam(cur().id, "type", typeSel.value);
      this._renderInspector();
    });
    box.appendChild(this._field("type", "text, number or json", typeSel));
    const type = n.params.type || "text";
    const err = h("div", { class: "mge-field-error", "data-error-for": "default" });
    const dv = n.params.default;
    let control;
    const key = `default:${id}`;
    if (type === "number") {
      control = h("input", { type: "number", step: "any", class: "mge-input", "data-param": "default",
        value: dv === null || dv === undefined ? "" : String(dv) });
      control.addEventListener("input", () => {
        const raw = control.value.trim();
        if (raw === "") { err.textContent = ""; this.setParam(cur().id, "default", undefined, key); return; }
        const num = Number(raw);
        if (!Number.isFinite(num)) { err.textContent = "not a number"; control.classList.add("mge-invalid"); return; }
        err.textContent = ""; control.classList.remove("mge-invalid");
        this.setParam(cur().id, "default", num, key);
      });
    } else if (type === "json") {
      control = h("textarea", { class: "mge-input mge-mono", rows: "3", "data-param": "default" });
      control.value = dv === null || dv === undefined ? "" : JSON.stringify(dv, null, 1);
      control.addEventListener("input", () => {
        const raw = control.value.trim();
        if (raw === "") { err.textContent = ""; this.setParam(cur().id, "default", undefined, key); return; }
        try {
          const v = JSON.parse(raw);
          err.textContent = ""; control.classList.remove("mge-invalid");
          this.setParam(cur().id, "default", v, key);
        } catch (ex) { err.textContent = `invalid JSON: ${ex.message}`; control.classList.add("mge-invalid"); }
      });
    } else {
      control = h("textarea", { class: "mge-input", rows: "3", "data-param": "default" });
      control.value = dv === null || dv === undefined ? "" : String(dv);
      control.addEventListener("input", () => {
        this.setParam(cur().id, "default", control.value === "" ? undefined : control.value, key);
      });
    }
    control.addEventListener("blur", () => { if (this.coalesceKey === key) this.coalesceKey = null; });
    box.appendChild(this._field("default", "Used when the run form leaves it empty.", control, err));
    const desc = h("input", { type: "text", class: "mge-input", "data-param": "description",
      value: n.params.description || "" });
    desc.addEventListener("input", () => this.setParam(cur().id, "description", desc.value || undefined, `desc:${id}`));
    box.appendChild(this._field("description", "Shown next to the field in the run form.", desc));
  }

  _renderWorkflowInspector(box) {
    box.appendChild(h("div", { class: "mge-panel-title" }, "Workflow"));
    const name = h("input", { type: "text", class: "mge-input", value: this.doc.meta.name, "data-testid": "wf-name" });
    name.addEventListener("input", () => this.setMeta("name", name.value, "wf-name"));
    name.addEventListener("blur", () => { this.coalesceKey = null; });
    box.appendChild(this._field("name", "", name));
    const desc = h("textarea", { class: "mge-input", rows: "3", "data-testid": "wf-description" });
    desc.value = this.doc.meta.description || "";
    desc.addEventListener("input", () => this.setMeta("description", desc.value, "wf-desc"));
    desc.addEventListener("blur", () => { this.coalesceKey = null; });
    box.appendChild(this._field("description", "", desc));
    const counts = this.doc.nodes.reduce((acc, n) => { acc[n.section || "nodes"] += 1; return acc; },
      { inputs: 0, nodes: 0, outputs: 0 });
    const plural = (k, word) => `${k} ${word}${k === 1 ? "" : "s"}`;
    box.appendChild(h("div", { class: "mge-muted" }, `${plural(counts.nodes, "node")}, ${plural(counts.inputs, "input")}, ` +
      `${plural(counts.outputs, "output")}, ${plural(this.doc.edges.length, "wire")}.`));
    box.appendChild(h("div", { class: "mge-help-box" }, [
      h("div", {}, "Click a node to edit it. Drag from an output (right) to an input (left) to connect."),
      h("div", {}, "Double-click the canvas or press / to add a node. Shift+drag selects an area."),
      h("div", {}, "Ctrl+Z / Ctrl+Shift+Z undo and redo; Ctrl+C / Ctrl+V copy and paste; F fits the view."),
    ]));
  }
}
