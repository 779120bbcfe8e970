/* Metagen Studio — the editor page's History panel (server functions in app/ui/history_panel.py).
 *
 * Lists the open workflow's saved versions, newest first (time, message, name, runs, best figure); previews one
 * read-only on the canvas (banner "Viewing version … (read-only) — Back to current / Restore"); draws the diff
 * of two ticked versions (or one against the current file) on the canvas: nodes marked added / removed (ghosted)
 * / changed, the changes (params old → new) listed under the panel; restores, names and publishes a version
 * (the owner's alone in share mode: the service's refusal is shown as it says it).
 *
 * Public: window.MetagenHistory.create({S, call, notice, loadCanvas, setYamlText, showIssues, setName, setDirty,
 *   applyChecks, confirmDiscard, openSaved, applyOpened}) -> {toggle, refresh, view, compare, back, restore, exit,
 *   selected, viewing}
 */
(function () {
  "use strict";

  const { esc } = window.MetagenRunOutputs;  // static/run_outputs.js

  function short(version) { return String(version || "").slice(0, 8); }

  function when(seconds) {
    const date = new Date(Number(seconds) * 1000);
    return isNaN(date.getTime()) ? "" : date.toLocaleString();
  }

  function create(host) {
    const { S, call, notice } = host;
    const el = () => ({
      panel: S.root.querySelector("[data-testid=history-panel]"),
      list: S.root.querySelector("[data-testid=history-list]"),
      error: S.root.querySelector("[data-testid=history-error]"),
      diff: S.root.querySelector("[data-testid=history-diff-list]"),
      banner: S.root.querySelector("[data-testid=version-banner]"),
      bannerText: S.root.querySelector("[data-testid=version-banner-text]"),
      restore: S.root.querySelector("[data-testid=version-restore]"),
    });
    const H = { versions: [], owner: true, bound: false };

    function showError(message) {
      const box = el().error;
      box.hidden = !message;
      box.textContent = message || "";
      if (message) notice(message, "error");
    }

    function render() {
      const list = el().list;
      if (!H.versions.length) {
        list.innerHTML = '<li class="mg-history-empty">No saved versions yet: Save records one.</li>';
        return;
      }
      const ownerOnly = H.owner ? "" : ' data-owner-only="1"';
      list.innerHTML = H.versions.map((v) => {
        const badges = (v.current ? '<span class="mg-badge" data-testid="version-current">current</span>' : "") +
          (v.published ? '<span class="mg-badge mg-published" data-testid="version-published">published</span>' : "");
        const viewing = S.viewing && S.viewing.version === v.version ? " mg-viewing" : "";
        return '<li class="mg-history-item' + viewing + '" data-version="' + esc(v.version) + '" ' +
          'data-testid="history-item">' +
          '<label class="mg-history-pick" title="Tick two versions (or one, against the current file) and Compare">' +
          '<input type="checkbox" data-testid="history-pick" value="' + esc(v.version) + '"></label>' +
          '<div class="mg-history-body">' +
          '<div class="mg-history-line"><code>' + esc(short(v.version)) + "</code> " +
          (v.name ? '<strong class="mg-history-name" data-testid="version-name">' + esc(v.name) + "</strong> " : "") +
          badges + '<span class="mg-history-time">' + esc(when(v.created_at)) + "</span></div>" +
          '<div class="mg-history-message" data-testid="version-message">' + esc(v.message || "—") + "</div>" +
          '<div class="mg-history-figures" data-testid="version-figures">' + esc(v.runs || 0) + " run" +
          (v.runs === 1 ? "" : "s") + (v.best !== null && v.best !== undefined ? " · best " + esc(v.best) : "") +
          "</div>" +
          '<div class="mg-history-actions">' +
          '<button class="mg-btn" data-hist="view" data-testid="version-view">View</button>' +
          // shown to visitors too: the service refuses them and the panel says why
          '<button class="mg-btn" data-hist="name" data-testid="version-name-btn"' + ownerOnly + ">Name…</button>" +
          (v.published
            ? '<button class="mg-btn" data-hist="unpublish" data-testid="version-unpublish"' + ownerOnly +
              ">Unpublish</button>"
            : '<button class="mg-btn" data-hist="publish" data-testid="version-publish"' + ownerOnly +
              ' title="App links, MCP tools, /v1 and auto serve this version until the next publish">Publish</button>') +
          "</div></div></li>";
      }).join("");
    }

    async function refresh() {
      if (!S.name) {
        H.versions = [];
        el().list.innerHTML = '<li class="mg-history-empty">Save the workflow to keep its versions.</li>';
        return;
      }
      const result = await call("mg_history", { name: S.viewing ? S.viewing.name : S.name });
      if (result.error) return showError(result.error);
      showError("");
      H.versions = result.versions || [];
      H.owner = result.owner !== false;
      render();
    }

    function toggle(show) {
      const panel = el().panel;
      panel.hidden = show === undefined ? !panel.hidden : !show;
      bind();
      if (!panel.hidden) refresh();
    }

    /** Enter the read-only view: nothing typed or drawn there reaches the file. */
    function enter(viewing, text) {
      S.viewing = viewing;
      if (S.ed && S.ed.setReadOnly) S.ed.setReadOnly(true);
      S.el.yaml.readOnly = true;
      const parts = el();
      parts.banner.hidden = false;
      parts.bannerText.textContent = text;
      parts.restore.textContent = "Restore " + short(viewing.version);
      render();
    }

    /** Leave the read-only view (the caller loads what comes next). */
    function exit() {
      if (!S.viewing) return;
      S.viewing = null;
      H.diff = null;
      selected(null);  // the inspector's list of a diff's changes goes with it
      if (S.ed && S.ed.setReadOnly) S.ed.setReadOnly(false);
      if (S.ed && S.ed.setMarks) S.ed.setMarks({});
      S.el.yaml.readOnly = false;
      el().banner.hidden = true;
      el().diff.hidden = true;
      render();
    }

    async function view(name, version) {
      H.diff = null;
      if (!S.viewing && !host.confirmDiscard()) return false;
      const result = await call("mg_open_version", { name: name, version: version });
      if (typeof result.error === "string") { showError(result.error); return false; }
      if (result.error) { showError("This version no longer loads: " + (result.error.message || "")); return false; }
      showError("");
      exit();
      if (S.gallery) S.gallery.hide();
      host.setName(name);
      host.setDirty(false);  // what was unsaved was given up (confirmDiscard) for this view
      host.loadCanvas(result.workflow, true);
      host.setYamlText(result.yaml);
      host.applyChecks(result, true);  // its problems and its run form (a past version may be run as it is)
      el().diff.hidden = true;
      enter({ name: name, version: result.version, kind: "preview" },
        "Viewing version " + short(result.version) + (result.label ? " “" + result.label + "”" : "") +
        (result.message ? " (" + result.message + ")" : "") + " of " + name + " (read-only) —");
      return true;
    }

    function picked() {
      return Array.from(el().list.querySelectorAll("[data-testid=history-pick]:checked")).map((box) => box.value);
    }

    async function compare(a, b) {
      const name = S.viewing ? S.viewing.name : S.name;
      if (!a) {
        const ticks = picked();
        if (!ticks.length || ticks.length > 2) {
          return showError("Tick two versions to compare them, or one to compare it with the current file.");
        }
        // the list is newest first: the older one (lower in the list) is the diff's "from"
        const order = H.versions.map((v) => v.version);
        ticks.sort((x, y) => order.indexOf(y) - order.indexOf(x));
        [a, b] = [ticks[0], ticks[1] || "current"];
      }
      if (!S.viewing && !host.confirmDiscard()) return;
      const result = await call("mg_diff_versions", { name: name, a: a, b: b || "current" });
      if (result.error) return showError(result.error);
      showError("");
      exit();
      host.setName(name);
      host.setDirty(false);  // what was unsaved was given up (confirmDiscard) for this view
      host.loadCanvas(result.workflow, true);
      host.showIssues([]);
      if (S.ed && S.ed.setMarks) S.ed.setMarks(result.marks || {});
      H.diff = result;
      const selection = S.ed ? S.ed.getSelection() : [];
      if (selection.length === 1) selected(selection[0]);  // a node kept selected across the load
      const box = el().diff;
      const lines = result.lines || [];
      box.hidden = false;
      box.innerHTML = "<strong>" + esc(short(result.a_version)) + " → " + esc(short(result.b_version)) +
        "</strong>" + (result.same ? '<div class="mg-diff-same">No change that decides a run.</div>' : "") +
        '<ul data-testid="diff-lines">' + lines.map((line) => {
          const kind = line[0] === "+" ? "added" : line[0] === "-" ? "removed" : "changed";
          return '<li class="mg-diff-line mg-diff-' + kind + '">' + esc(line) + "</li>";
        }).join("") + "</ul>";
      enter({ name: name, version: result.a_version, kind: "diff" },
        "Comparing version " + short(result.a_version) + " with " + short(result.b_version) +
        " (read-only; green added, red removed, amber changed) —");
    }

    async function back() {
      const name = S.viewing ? S.viewing.name : S.name;
      exit();
      if (name) await host.openSaved(name, true);
    }

    async function restore(version) {
      const name = S.viewing ? S.viewing.name : S.name;
      version = version || (S.viewing && S.viewing.version);
      if (!name || !version) return;
      const result = await call("mg_restore_version", { name: name, version: version });
      if (result.error) return showError(typeof result.error === "string" ? result.error : result.error.message);
      showError("");
      exit();
      host.applyOpened(result, result.name || name, false);
      H.versions = result.versions || H.versions;
      render();
      const children = result.restored_subworkflows || [];
      notice("Restored version " + short(version) + " to " + name + ".yaml" +
        (children.length ? ", with its sub-workflow" + (children.length > 1 ? "s " : " ") + children.join(", ") : "") +
        " (the files before it are kept as versions).", "ok");
    }

    async function nameVersion(version) {
      const current = H.versions.find((v) => v.version === version);
      const label = window.prompt("Name version " + short(version) + " (empty: no name)", (current && current.name) || "");
      if (label === null) return;
      const result = await call("mg_name_version", { name: S.viewing ? S.viewing.name : S.name, version: version,
        label: label });
      if (result.error) return showError(result.error);
      await refresh();
      notice(result.label ? "Version " + short(version) + " is named " + result.label + "." : "Name removed.", "ok");
    }

    async function publish(version) {
      const result = await call("mg_publish_version", { name: S.viewing ? S.viewing.name : S.name, version: version });
      if (result.error) return showError("Not published: " + result.error);
      await refresh();
      notice("Published version " + short(result.version) + " of " + result.workflow +
        ": app links, MCP and /v1 serve it until the next publish.", "ok");
    }

    async function unpublish() {
      const name = S.viewing ? S.viewing.name : S.name;
      const result = await call("mg_unpublish_version", { name: name });
      if (result.error) return showError("Not unpublished: " + result.error);
      await refresh();
      notice("Unpublished " + name + ": the doors serve the file as saved again.", "ok");
    }

    /** A node selected on a drawn diff: its changes (params old → new) at the top of the inspector, put back
     *  whenever the inspector draws itself again. */
    function selected(nodeId) {
      H.selectedNode = nodeId || null;
      const inspector = S.ed && S.ed.inspector;
      if (!inspector) return;
      if (!H.observer && window.MutationObserver) {
        H.observer = new MutationObserver(() => inspectorDiff(inspector));
        H.observer.observe(inspector, { childList: true });
      }
      inspectorDiff(inspector);
    }

    function inspectorDiff(inspector) {
      const nodeId = H.selectedNode;
      const mark = S.viewing && S.viewing.kind === "diff" && H.diff && nodeId ? (H.diff.marks || {})[nodeId] : null;
      const old = inspector.querySelector("[data-testid=inspector-diff]");
      if (old && (!mark || old.dataset.node !== nodeId)) old.remove();
      else if (old) return;
      if (!mark) return;
      const params = (H.diff.params || []).filter((p) => p.node === nodeId);
      const show = (value) => value === null || value === undefined ? "—" : JSON.stringify(value);
      const box = document.createElement("div");
      box.className = "mg-inspector-diff mg-diff-" + mark;
      box.setAttribute("data-testid", "inspector-diff");
      box.dataset.node = nodeId;
      box.innerHTML = "<strong>" + esc(mark === "added" ? "Added in the newer version" : mark === "removed"
        ? "Removed in the newer version" : "Changed") + "</strong>" +
        (params.length ? "<ul>" + params.map((p) => "<li><code>" + esc(p.param) + "</code>: " + esc(show(p.old)) +
          " → " + esc(show(p.new)) + "</li>").join("") + "</ul>" : "");
      inspector.prepend(box);
    }

    function bind() {
      if (H.bound) return;
      H.bound = true;
      el().list.addEventListener("click", (e) => {
        const button = e.target.closest("[data-hist]");
        const item = button && button.closest("[data-version]");
        if (!item) return;
        e.preventDefault();
        const version = item.dataset.version;
        const act = { view: () => view(S.viewing ? S.viewing.name : S.name, version), name: () => nameVersion(version),
          publish: () => publish(version), unpublish: unpublish }[button.dataset.hist];
        if (act) act();
      });
    }

    return { toggle, refresh, view, compare, back, restore, exit, selected, viewing: () => S.viewing };
  }

  window.MetagenHistory = { create: create };
})();
