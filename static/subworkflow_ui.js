/* Sub-workflows on the editor page (beside ui_bridge.js): "Make sub-workflow" saves the new child workflow through
 * the app, and a double-click on a workflow node opens its child with a breadcrumb back to the parent, which is
 * kept as it was (unsaved changes included) and gets the child's ports as saved. */
(function () {
  "use strict";

  const parents = []; // {name, yaml, dirty} of each workflow above the one shown, outermost first
  const made = {};    // name -> the YAML Make sub-workflow wrote on this page (its undo may delete it if unchanged)
  const madeWorkflows = {};  // name -> the workflow JSON it wrote (a redo after a deleting undo writes it again)
  const deleted = new Set();  // the files an undo deleted (their redo writes them again)

  function ui() { return window.MetagenUI; }

  function bar() {
    let el = document.querySelector("[data-testid=subworkflow-breadcrumb]");
    const main = document.querySelector(".mg-main");
    if (!el && main) {
      el = document.createElement("div");
      el.className = "mg-breadcrumb";
      el.setAttribute("data-testid", "subworkflow-breadcrumb");
      main.parentNode.insertBefore(el, main);
    }
    return el;
  }

  function render() {
    const el = bar();
    if (!el) return;
    el.textContent = "";
    el.hidden = !parents.length;
    if (!parents.length) return;
    const back = document.createElement("button");
    back.type = "button";
    back.className = "mg-btn";
    back.setAttribute("data-testid", "subworkflow-back");
    back.textContent = "\u2190 Back to " + (parents[parents.length - 1].name || "the parent workflow");
    back.addEventListener("click", () => { goBack(); });
    const path = document.createElement("span");
    path.className = "mg-crumbs";
    path.textContent = parents.map((p) => p.name || "untitled").concat([ui().state().name || "untitled"])
      .join(" \u203a ");
    el.append(back, " ", path);
  }

  /** The editor's onNameSubworkflow: a dialog for the new workflow's name and its inferred input and output
   * names; resolves to {name, inputs: {old: new}, outputs: {old: new}}, or null when cancelled. */
  function nameDialog(request) {
    return new Promise((resolve) => {
      const box = document.createElement("form");
      box.className = "mg-subworkflow-dialog";
      box.setAttribute("data-testid", "subworkflow-dialog");
      const add = (tag, props) => box.appendChild(Object.assign(document.createElement(tag), props));
      add("strong", { textContent: "Make sub-workflow" });
      const field = (label, value, testid) => {
        const row = add("label", { textContent: label + " " });
        const input = row.appendChild(Object.assign(document.createElement("input"), { value: value }));
        input.setAttribute("data-testid", testid);
        return input;
      };
      const name = field("Workflow name", request.suggestion, "subworkflow-name");
      const ports = (list, what) => (list || []).map((p) => [p.name,
        field(what + " " + p.name + " (" + p.type + ")", p.name, "subworkflow-" + what + "-" + p.name)]);
      const inputs = ports(request.inputs, "input");
      const outputs = ports(request.outputs, "output");
      const buttons = add("div", { className: "mg-dialog-buttons" });
      const button = (text, testid, type) => {
        const b = buttons.appendChild(Object.assign(document.createElement("button"), { textContent: text, type: type }));
        b.className = "mg-btn";
        b.setAttribute("data-testid", testid);
        return b;
      };
      button("Make", "subworkflow-ok", "submit");
      const cancel = button("Cancel", "subworkflow-cancel", "button");
      const names = (pairs) => Object.fromEntries(pairs.map(([old, input]) => [old, input.value.trim()]));
      const finish = (value) => { box.remove(); resolve(value); };
      box.addEventListener("submit", (e) => {
        e.preventDefault();
        finish({ name: name.value.trim(), inputs: names(inputs), outputs: names(outputs) });
      });
      cancel.addEventListener("click", () => finish(null));
      box.addEventListener("keydown", (e) => { if (e.key === "Escape") { e.preventDefault(); finish(null); } });
      (document.querySelector(".mg-page") || document.body).appendChild(box);
      name.focus();
      name.select();
    });
  }

  /** The editor's onMakeSubworkflow: save the child as a new workflow (never over an existing one). */
  async function make(name, workflow) {
    const result = await ui().call("mg_save", { name: name, workflow: workflow, overwrite: false });
    if (result.error) throw new Error(result.error);
    made[result.name || name] = result.yaml;
    madeWorkflows[result.name || name] = workflow;
    ui().refreshLists(result);
  }

  /** The editor's onRedoSubworkflow: Make sub-workflow was redone; the workflow node names the child again, so a
   * file its undo deleted is written again (never over a file made meanwhile under that name). */
  async function redone(name) {
    if (!deleted.has(name) || !madeWorkflows[name]) return;
    const result = await ui().call("mg_save", { name: name, workflow: madeWorkflows[name], overwrite: false });
    if (result.error) return ui().notice("Could not write " + name + ".yaml again: " + result.error, "error");
    deleted.delete(name);
    made[result.name || name] = result.yaml;
    ui().refreshLists(result);
    ui().notice("Wrote " + name + ".yaml again (redo of Make sub-workflow).", "ok");
  }

  /** The editor's onUndoSubworkflow: Make sub-workflow was undone; offer to delete the file it wrote, only when
   * the file is still exactly what it wrote (a child edited since is kept without asking). */
  async function undone(name) {
    if (typeof made[name] !== "string") return;
    const current = await ui().call("mg_open", { name: name });
    if (current.error || current.yaml !== made[name]) {
      delete made[name];
      return;
    }
    if (!window.confirm("Make sub-workflow was undone. Also delete the workflow file '" + name + ".yaml' it " +
        "wrote? It has not changed since.")) return;
    const result = await ui().call("mg_delete_made", { name: name, yaml: made[name] });
    delete made[name];
    if (result.error) return ui().notice(result.error, "error");
    if (result.deleted) {
      deleted.add(name);
      ui().refreshLists(result);
      ui().notice("Deleted " + name + ".yaml.", "ok");
    } else {
      ui().notice("Kept " + name + ".yaml: it " + (result.reason === "gone" ? "is no longer there." : "changed."), "warn");
    }
  }

  /** The editor's onOpenWorkflow: open the child, keeping the parent for the way back. */
  function hashOf(name) {
    const ed = ui().editor();
    const ports = ed && ed.workflows && ed.workflows.get(name);
    return ports ? JSON.stringify(ports) : null;
  }

  async function open(name) {
    const state = ui().state();
    parents.push({ name: state.name, yaml: ui().currentYaml(), dirty: state.dirty, child: name, seen: hashOf(name),
      origin: state.origin, linked: state.linked, linkedPorts: state.linkedPorts });
    if (state.linked && typeof state.linked[name] === "string") {  // a child the page's link carried: not a file
      await ui().openYaml(state.linked[name], name, "link", name, false, state.linked, state.linkedPorts);
    } else {
      await ui().openSaved(name, true);
    }
    if (ui().state().name !== name) parents.pop(); // it did not open (the notice says why)
    render();
  }

  async function goBack() {
    const parent = parents[parents.length - 1];
    if (!parent) return;
    const state = ui().state();
    if (state.dirty && !window.confirm("Go back without saving the changes to '" + (state.name || "untitled") + "'?")) {
      return;
    }
    parents.pop();
    // the parent comes back as it came (a link's or an upload's origin, a link's sub-workflows)
    await ui().openYaml(parent.yaml, parent.name || "the parent workflow", parent.origin || "file", parent.name,
      parent.dirty, parent.linked, parent.linkedPorts);
    const lists = await ui().call("mg_list", {});
    if (!lists.error) ui().refreshLists(lists); // the child may have changed: its ports
    if (hashOf(parent.child) !== parent.seen && ui().editor()) ui().editor().markChildChanged(parent.child);
    render();
  }

  window.MetagenSubworkflows = { make: make, name: nameDialog, open: open, back: goBack, undone: undone,
    redone: redone,
    made: () => Object.keys(made),
    parents: () => parents.map((p) => p.name) };
})();
