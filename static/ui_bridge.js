/* Metagen Studio — editor page controller.
 *
 * Wires the page markup of app/ui/editor_page.py to the node-graph editor (static/editor.js loads its ES
 * modules; window.MetagenEditor once window.MetagenEditorReady resolves) and to the Python service through Gradio's `server` functions
 * (each takes one JSON payload and answers JSON, or {error: "..."}).
 *
 *   canvas edit  -> mg_from_editor -> canonical YAML in the pane + problems painted on nodes
 *   YAML typing  -> mg_parse_yaml  -> canvas reloads, or the error with its line (nothing is lost)
 *   Run          -> mg_run, then mg_status polled while runs are active -> live node states
 *
 * The first screen (no draft to restore, no link) and "New from example…" show the strategy gallery
 * (static/gallery.js) over the empty canvas.
 *
 * Public: window.MetagenUI.start(element, server), .openYaml(text, name), .openExample(name), .showGallery(),
 * .state(), .currentYaml()
 */
(function () {
  "use strict";

  const DRAFT_KEY = "metagen.draft.v1";
  const MAX_UPLOAD_BYTES = 2_000_000;  // workflows are a few KB; refuse to pour a large file into the YAML pane
  const EDITOR_WAIT_MS = 20_000;       // how long to wait for the editor's ES modules (static/editor/) to load
  const EMPTY = { version: 1, name: "untitled", nodes: [], outputs: {} };

  const S = {
    root: null, server: null, ed: null, el: {},
    name: null,            // saved workflow name (null = never saved)
    dirty: false,
    yamlError: null,       // {message, line} while the YAML pane does not parse
    loadedSig: null,       // JSON of what we last loaded into the canvas (to ignore echo onChange)
    seq: { canvas: 0, yaml: 0 },
    inputs: {},            // the workflow's declared inputs
    runs: [],              // snapshots, newest last
    currentRun: null,
    pollTimer: null,
    selectedNode: null,
    timers: {},
    errorCount: 0,         // error-severity problems of the current workflow (from the last check)
    firstError: null,      // the first of them, quoted when a run is refused
    problemsNotice: false, // the notice says "fix the problems": clear it once they are fixed
    yamlEdits: 0,          // keystrokes in the YAML pane (a canvas sync started before one must not overwrite it)
    origin: "file",        // where the workflow came from: "file" (saved/example/new), "link" (?wf=) or "upload"
    pythonConfirmed: false, // the user saw and accepted its python code (asked before the first run, see run())
    linked: {},            // sub-workflows a ?wf= link carried (name -> YAML): sent with checks and runs, never saved
    linkedPorts: {},       // their ports, drawn instead of the folder's workflows of the same name
    offeredDraft: null,    // a draft kept aside while the page shows what its link names (offered, never restored
                           // over the link); stays in storage until opened or discarded
    openedYaml: null,      // the YAML as last opened (Open draft asks before replacing edits made since)
    viewing: null,         // {name, version, kind: "preview" | "diff"}: a past version shown read-only
                           // (static/history_panel.js); nothing typed or drawn reaches the file
  };

  const LINKED_CALLS = ["mg_parse_yaml", "mg_from_editor", "mg_run"];  // the calls that check or run the workflow

  // ------------------------------------------------------------------ helpers

  const { esc } = window.MetagenRunOutputs;  // static/run_outputs.js

  function debounce(key, ms, fn) {
    clearTimeout(S.timers[key]);
    S.timers[key] = setTimeout(fn, ms);
  }

  async function call(fn, payload) {
    payload = payload || {};
    if (LINKED_CALLS.includes(fn) && payload.children === undefined && Object.keys(S.linked).length) {
      payload = Object.assign({}, payload, { children: S.linked });
    }
    try {
      const result = await S.server[fn](payload);
      return result || {};
    } catch (err) {
      return { error: "the app did not answer (" + (err && err.message ? err.message : err) + "); is it still running?" };
    }
  }

  function notice(message, kind) {
    const el = S.el.notice;
    if (!el) return;
    el.textContent = message || "";
    el.className = "mg-notice" + (kind ? " mg-" + kind : "");
    clearTimeout(S.timers.notice);
    if (message && kind !== "error") {
      S.timers.notice = setTimeout(() => { el.textContent = ""; el.className = "mg-notice"; }, 8000);
    }
  }

  function currentWorkflow() {
    if (!S.ed) return JSON.parse(JSON.stringify(EMPTY));
    return S.ed.getWorkflow();
  }

  // ------------------------------------------------------------------ dirty state and drafts

  function setDirty(dirty) {
    S.dirty = dirty;
    S.el.dirty.hidden = !dirty;
    if (dirty) {
      saveDraft();
    } else if (!S.offeredDraft) {  // an offered draft is the visitor's until they open or discard it
      try { localStorage.removeItem(DRAFT_KEY); } catch (e) { /* storage off: nothing to clear */ }
    }
  }

  function saveDraft() {
    if (!S.dirty || S.offeredDraft) return;  // never over a draft on offer (beforeunload still warns)
    try {
      localStorage.setItem(DRAFT_KEY, JSON.stringify({
        name: S.name, yaml: S.el.yaml.value, saved_at: new Date().toISOString(), origin: S.origin,
        children: S.linked, children_ports: S.linkedPorts,
      }));
    } catch (e) { /* storage full or disabled: the beforeunload warning still protects the work */ }
  }

  function readDraft() {
    try {
      const raw = localStorage.getItem(DRAFT_KEY);
      return raw ? JSON.parse(raw) : null;
    } catch (e) {
      return null;
    }
  }

  function setName(name) {
    S.name = name || null;
    showTitle();
  }

  /** The toolbar title: the saved file's name, else the workflow's own `name:` (not saved yet). */
  function showTitle(workflowName) {
    const fallback = workflowName || (S.ed ? (currentWorkflow().name || "") : "");
    S.el.title.textContent = S.name || fallback || "untitled";
    S.el.title.title = S.name ? "saved as " + S.name + ".yaml in the workflows folder" : "not saved yet";
  }

  /** A free file name suggested for a workflow name ("self-consistency" -> "self_consistency", or "..._2"). */
  function suggestedFileName(workflowName) {
    const base = String(workflowName || "").trim().toLowerCase().replace(/[^a-z0-9_-]+/g, "_")
      .replace(/-/g, "_").replace(/^_+|_+$/g, "");
    if (!base || base === "untitled") return "";
    const taken = new Set(Array.from(S.el.openSelect.options).map((o) => o.value));
    let name = base;
    for (let i = 2; taken.has(name); i++) name = base + "_" + i;  // never propose overwriting a saved one
    return name;
  }

  // ------------------------------------------------------------------ YAML pane

  function updateGutter() {
    const lines = S.el.yaml.value.split("\n").length;
    const errLine = S.yamlError && S.yamlError.line;
    let html = "";
    for (let i = 1; i <= lines; i++) {
      html += i === errLine ? '<span class="mg-err-line">' + i + "</span>\n" : i + "\n";
    }
    S.el.gutter.innerHTML = html;
    S.el.gutter.scrollTop = S.el.yaml.scrollTop;
  }

  function setYamlText(text) {
    if (S.el.yaml.value !== text) {
      const top = S.el.yaml.scrollTop;
      S.el.yaml.value = text;
      S.el.yaml.scrollTop = top;
    }
    updateGutter();
  }

  function showYamlError(error) {
    S.yamlError = error;
    const box = S.el.yamlError;
    if (error) {
      box.hidden = false;
      box.innerHTML = (error.line ? '<a href="#" class="mg-goto-line" data-line="' + esc(error.line) +
        '">Line ' + esc(error.line) + "</a>: " : "") + esc(error.message) +
        '<div class="mg-hint">The canvas keeps the last valid version; your text is kept as typed.</div>';
      S.el.yamlStatus.textContent = "error";
      S.el.yamlStatus.className = "mg-yaml-status mg-bad";
    } else {
      box.hidden = true;
      box.innerHTML = "";
      S.el.yamlStatus.textContent = "in sync";
      S.el.yamlStatus.className = "mg-yaml-status";
    }
    updateGutter();
  }

  function gotoLine(line) {
    const lines = S.el.yaml.value.split("\n");
    let start = 0;
    for (let i = 0; i < Math.min(line - 1, lines.length); i++) start += lines[i].length + 1;
    const end = start + (lines[line - 1] || "").length;
    S.el.yaml.focus();
    S.el.yaml.setSelectionRange(start, end);
    const lineHeight = parseFloat(getComputedStyle(S.el.yaml).lineHeight) || 18;
    S.el.yaml.scrollTop = Math.max(0, (line - 5) * lineHeight);
    updateGutter();
  }

  async function onYamlInput() {
    if (S.viewing) return;  // a past version: read-only
    S.yamlEdits++;
    setDirty(true);
    updateGutter();
    S.el.yamlStatus.textContent = "…";
    debounce("yaml", 350, async () => {
      const seq = ++S.seq.yaml;
      const text = S.el.yaml.value;
      const result = await call("mg_parse_yaml", { text: text });
      if (seq !== S.seq.yaml) return;  // a newer edit is on its way
      if (result.error && typeof result.error === "object") {
        showYamlError(result.error);
        showIssues(result.issues || []);
        return;
      }
      if (result.error) {
        notice(result.error, "error");
        return;
      }
      showYamlError(null);
      loadCanvas(result.workflow, false);
      if (S.gallery && !isEmptyWorkflow()) S.gallery.hide();  // typed or pasted a workflow: show it
      applyChecks(result);
      saveDraft();
    });
  }

  // ------------------------------------------------------------------ canvas

  function loadCanvas(workflow, fit) {
    if (!S.ed) return;
    S.loadedSig = null;
    S.ed.load(workflow, { fit: !!fit });
    S.loadedSig = JSON.stringify(S.ed.getWorkflow());
  }

  function onCanvasChange(arg) {
    const wf = arg && typeof arg === "object" && Array.isArray(arg.nodes) ? arg : currentWorkflow();
    if (S.loadedSig !== null && JSON.stringify(wf) === S.loadedSig) return;  // echo of our own load
    if (S.viewing) return;  // a past version or a diff: read-only, never the file's
    S.loadedSig = null;
    setDirty(true);
    syncYamlFromCanvas();
  }

  function syncYamlFromCanvas() {
    const edits = S.yamlEdits;  // as of the canvas change, not of the (debounced) request
    debounce("canvas", 120, async () => {
      const seq = ++S.seq.canvas;
      const result = await call("mg_from_editor", { workflow: currentWorkflow() });
      if (seq !== S.seq.canvas) return;
      // the user typed in the YAML pane after this canvas change (e.g. pasted right after New):
      // their text is newer, and its own parse will redraw the canvas, so do not overwrite it
      if (edits !== S.yamlEdits) return;
      if (result.error) {
        notice(result.error, "error");
        return;
      }
      S.seq.yaml++;  // a pending YAML parse is older than this canvas edit
      showYamlError(null);
      setYamlText(result.yaml);
      applyChecks(result);
      saveDraft();
    });
  }

  function applyChecks(result, opened) {  // opened: another workflow was opened, its run inputs start at defaults
    // an unsaved workflow is titled by its `name:`, which may just have changed
    if (!S.name) showTitle(result.workflow && result.workflow.name);
    showIssues(result.issues || []);
    renderInputs(result.inputs || {}, !!opened);
  }

  function isEmptyWorkflow() {
    const wf = S.ed ? currentWorkflow() : null;
    return !!wf && !(wf.nodes || []).length && !Object.keys(wf.outputs || {}).length;
  }

  function showIssues(allIssues) {
    const list = S.el.issues;
    // an empty canvas is a starting point, not a mistake: no red "declares no outputs" on first sight
    const issues = isEmptyWorkflow() ? allIssues.filter((i) => i.code !== "no_outputs") : allIssues;
    const errorIssues = issues.filter((i) => i.severity === "error");
    S.errorCount = errorIssues.length;
    S.firstError = errorIssues.length ? errorIssues[0] : null;
    if (S.errorCount === 0 && S.problemsNotice) {
      // the run was refused for problems that are now fixed: drop the stale banner
      S.problemsNotice = false;
      notice("", "");
      if (S.el.runText.classList.contains("mg-bad")) {
        S.el.runText.textContent = "Problems fixed: ready to run.";
        S.el.runText.className = "mg-run-text";
      }
    }
    S.el.issueCount.textContent = String(issues.length);
    S.el.issueCount.className = "mg-issue-count" + (issues.some((i) => i.severity === "error") ? " mg-bad" : "");
    list.innerHTML = issues.map((i) =>
      '<li class="mg-issue mg-' + esc(i.severity) + '" data-code="' + esc(i.code) + '"' +
      (i.line ? ' data-line="' + esc(i.line) + '"' : "") + ">" +
      '<span class="mg-issue-code">' + esc(i.code) + "</span> " +
      (i.node_id ? '<span class="mg-issue-node">' + esc(i.node_id) + "</span> " : "") +
      esc(i.message) + (i.hint ? '<div class="mg-hint">' + esc(i.hint) + "</div>" : "") +
      (i.line ? '<span class="mg-issue-line">line ' + esc(i.line) + "</span>" : "") + "</li>").join("");
    if (S.ed && S.ed.setIssues) S.ed.setIssues(issues);
  }

  // ------------------------------------------------------------------ opening and saving

  /** The ports of the workflows a workflow node may use: the folder's, and those the page's link carried. */
  function applyWorkflowPorts(folderPorts) {
    if (folderPorts) S.ports = folderPorts;
    if (S.ed) S.ed.setWorkflows(Object.assign({}, S.ports, S.linkedPorts));
  }

  function applyOpened(result, name, dirty, origin, linked, linkedPorts) {
    if (S.viewing) historyUi.exit();  // another workflow (or the current file) replaces the read-only view
    S.origin = origin || "file";
    const hadLinked = Object.keys(S.linkedPorts).length > 0;
    S.linked = linked || {};
    S.linkedPorts = linkedPorts || {};
    if (hadLinked || Object.keys(S.linkedPorts).length) applyWorkflowPorts();
    S.pythonConfirmed = false;
    if (!S.offeredDraft) S.el.draft.hidden = true;  // a restored draft's banner speaks of that draft only
    if (S.gallery) S.gallery.hide();  // a workflow is open: the canvas shows it
    if (result.error && typeof result.error === "object") {
      // the file does not parse: show its text and the error; the canvas is left as it was
      setYamlText(result.yaml || "");
      showYamlError(result.error);
      showIssues(result.issues || []);
    } else {
      showYamlError(null);
      loadCanvas(result.workflow, true);
      setYamlText(result.yaml);
      applyChecks(result, true);
    }
    setName(name);
    setDirty(dirty);
    S.openedYaml = S.el.yaml.value;
    clearRunView();
  }

  function confirmDiscard() {  // names the workflow that is open, as its title does (an unsaved one by its `name:`)
    return !S.dirty || window.confirm("Discard the unsaved changes to '" +
      (S.name || S.el.title.textContent || "untitled") + "'?");
  }

  async function openSaved(name, keepCurrent) {  // keepCurrent: the page keeps it (a child opened from its parent)
    if (!name || (!keepCurrent && !confirmDiscard())) return;
    const result = await call("mg_open", { name: name });
    if (typeof result.error === "string") return notice(result.error, "error");
    applyOpened(result, result.name, false);
    notice("Opened " + result.name + ".", "ok");
  }

  /** An example as a new workflow: not an unsaved change (nothing of the user's is in it until they edit it). */
  async function openExample(name) {
    if (!name || !confirmDiscard()) return;
    const result = await call("mg_example", { name: name });
    if (typeof result.error === "string") return notice(result.error, "error");
    applyOpened(result, null, false, "file", result.children, result.children_ports);
    notice("New workflow from the example " + name + " (not saved yet).", "ok");
  }

  /** The Tune tab (app/ui/tune_tab.py), by its tab button. */
  function openTune() {
    const tabs = Array.from(document.querySelectorAll("button[role=tab]"));
    const button = document.getElementById("mg-tab-tune-button") ||
      tabs.find((b) => b.textContent.trim() === "Tune");
    if (button) button.click();
    else notice("The Tune tab is not available in this app.", "warn");
  }

  function newWorkflow() {
    if (!confirmDiscard()) return;
    if (S.gallery) S.gallery.hide();
    loadCanvas(JSON.parse(JSON.stringify(EMPTY)), true);
    S.el.draft.hidden = true;
    setName(null);
    setDirty(false);
    showYamlError(null);
    syncYamlFromCanvas();
    clearRunView();
  }

  function askName(initial) {
    return new Promise((resolve) => {
      const box = S.el.nameDialog;
      const input = box.querySelector("input");
      input.value = initial || "";
      box.hidden = false;
      input.focus();
      input.select();
      const finish = (value) => {
        box.hidden = true;
        box.onsubmit = null;
        box.querySelector("[data-action=name-cancel]").onclick = null;
        resolve(value);
      };
      box.onsubmit = (e) => { e.preventDefault(); finish(input.value.trim() || null); };
      input.onkeydown = (e) => { if (e.key === "Escape") { e.preventDefault(); finish(null); } };
      box.querySelector("[data-action=name-cancel]").onclick = () => finish(null);
    });
  }

  async function save(asNew) {
    if (S.viewing) {
      notice("This is version " + String(S.viewing.version).slice(0, 8) + " of " + S.viewing.name +
        ", read-only: press Back to current to edit the file, or Restore to make it the file again.", "error");
      return;
    }
    if (S.yamlError) {
      notice("Fix the YAML error" + (S.yamlError.line ? " on line " + S.yamlError.line : "") +
        " before saving (your text is kept).", "error");
      return;
    }
    let name = S.name;
    const overwrite = !asNew && !!name;
    if (asNew || !name) {
      name = await askName(name || suggestedFileName(currentWorkflow().name));
      if (!name) return;
    }
    const workflow = currentWorkflow();
    if ((asNew || !S.name) && (!workflow.name || workflow.name === "untitled")) workflow.name = name;
    // a link's (or a traced run's) sub-workflows are saved with it, or the saved file would name missing children
    const result = await call("mg_save", { name: name, workflow: workflow, overwrite: overwrite, children: S.linked });
    if (result.error) return notice(result.error, "error");
    S.el.draft.hidden = true;  // saved: no longer an unsaved draft
    S.linked = {};  // now files of the folder (or the same files already there): the folder's ports stand
    S.linkedPorts = {};
    if (workflow.name === name) loadCanvas(workflow, false);
    setYamlText(result.yaml);
    setName(result.name);
    setDirty(false);
    fillSelect(S.el.openSelect, result.workflows, "Open…");
    applyWorkflowPorts(result.workflow_ports);  // a child's ports may have changed; the link's are files now
    const withChildren = (result.children_saved || []).length;
    if (!historyUi.hidden()) historyUi.refresh();  // the save is a new version
    notice("Saved " + result.name + ".yaml" + (withChildren ? " and its sub-workflow" + (withChildren > 1 ? "s " : " ") +
      result.children_saved.join(", ") : ""), "ok");
  }

  function download() {
    const blob = new Blob([S.el.yaml.value], { type: "text/yaml" });
    const link = document.createElement("a");
    link.href = URL.createObjectURL(blob);
    link.download = (S.name || currentWorkflow().name || "workflow") + ".yaml";
    document.body.appendChild(link);
    link.click();
    setTimeout(() => { URL.revokeObjectURL(link.href); link.remove(); }, 1000);
  }

  function upload(file) {
    if (!file || !confirmDiscard()) return;
    const reader = new FileReader();
    if (file.size > MAX_UPLOAD_BYTES) {
      return notice(file.name + " is " + Math.round(file.size / 1e6) + " MB; a workflow is a small YAML text file. " +
        "Nothing was loaded.", "error");
    }
    reader.onload = async () => {
      const text = String(reader.result || "");
      if (/[\u0000\uFFFD]/.test(text)) {  // NUL bytes or undecodable UTF-8: an image, archive, model file...
        return notice(file.name + " is not a text file (a workflow is YAML text); nothing was loaded.", "error");
      }
      const result = await call("mg_parse_yaml", { text: text });
      if (typeof result.error === "string") return notice(result.error, "error");
      result.yaml = text;
      applyOpened(result, null, true, "upload");
      notice("Loaded " + file.name + "; use Save as to keep it in the workflows folder.", "ok");
    };
    reader.onerror = () => notice("Could not read " + file.name + ".", "error");
    reader.readAsText(file);
  }

  function fillSelect(select, names, placeholder) {
    select.innerHTML = '<option value="">' + esc(placeholder) + "</option>" +
      (names || []).map((n) => '<option value="' + esc(n) + '">' + esc(n) + "</option>").join("");
  }

  // ------------------------------------------------------------------ the run panel (static/run_panel.js)

  const { renderInputs, run, cancel, schedulePoll, showRun, clearRunView, onSelect } =
    window.MetagenRunPanel.create({ S, call, notice, currentWorkflow, isEmptyWorkflow });

  // ------------------------------------------------------------------ the History panel (static/history_panel.js)

  const historyPanel = window.MetagenHistory.create({ S, call, notice, loadCanvas, setYamlText, showIssues, setName,
    setDirty, applyChecks, confirmDiscard, openSaved: (name, keep) => openSaved(name, keep), applyOpened: (...a) => applyOpened(...a) });
  const historyUi = Object.assign({}, historyPanel, {
    hidden: () => { const p = S.root && S.root.querySelector("[data-testid=history-panel]"); return !p || p.hidden; },
  });

  // ------------------------------------------------------------------ start-up

  function bind(root) {
    const q = (sel) => root.querySelector(sel);
    S.el = {
      title: q("[data-testid=wf-title]"), dirty: q("[data-testid=dirty-flag]"), notice: q("[data-testid=notice]"),
      openSelect: q("[data-testid=open-select]"),
      upload: q("[data-testid=upload-input]"), draft: q("[data-testid=draft-banner]"),
      canvas: q("[data-testid=canvas-host]"), yaml: q("[data-testid=yaml-editor]"), gutter: q(".mg-gutter"),
      yamlError: q("[data-testid=yaml-error]"), yamlStatus: q("[data-testid=yaml-status]"),
      issues: q("[data-testid=issues]"), issueCount: q("[data-testid=issue-count]"),
      inputs: q("[data-testid=run-inputs]"), seed: q("[data-testid=seed-input]"),
      runBtn: q("[data-testid=run-btn]"), cancelBtn: q("[data-testid=cancel-btn]"),
      progress: q("[data-testid=run-progress]"), progressBar: q(".mg-progress-bar"),
      runText: q("[data-testid=run-status]"), runList: q("[data-testid=run-list]"),
      outputs: q("[data-testid=run-outputs]"), nodeOutputs: q("[data-testid=node-outputs]"),
    };
    const dialog = document.createElement("form");
    dialog.className = "mg-name-dialog";
    dialog.hidden = true;
    dialog.setAttribute("data-testid", "name-dialog");
    dialog.innerHTML = '<label>Workflow name <input type="text" data-testid="name-input" ' +
      'placeholder="my_workflow" autocomplete="off"></label>' +
      '<button class="mg-btn mg-primary" type="submit" data-testid="name-ok">Save</button>' +
      '<button class="mg-btn" type="button" data-action="name-cancel">Cancel</button>';
    q(".mg-toolbar").after(dialog);
    S.el.nameDialog = dialog;

    root.addEventListener("click", (e) => {
      const target = e.target.closest("[data-action], .mg-goto-line, .mg-issue[data-line], [data-run]");
      if (!target || !root.contains(target)) return;
      if (target.matches(".mg-goto-line, .mg-issue[data-line]")) {
        e.preventDefault();
        gotoLine(parseInt(target.dataset.line, 10));
        return;
      }
      if (target.dataset.run) {
        S.currentRun = target.dataset.run;
        const snap = S.runs.find((r) => r.run_id === S.currentRun);
        if (snap) showRun(snap);
        return;
      }
      const actions = {
        new: newWorkflow, save: () => save(false), "save-as": () => save(true), download: download,
        run: () => (S.viewing && S.viewing.kind === "diff"  // a diff's canvas, ghosts included, is no workflow
          ? notice("This is a diff of two versions, not a workflow to run: press Back to current first.", "error")
          : run()),
        cancel: cancel, gallery: () => S.gallery && S.gallery.show(),
        "gallery-close": () => S.gallery && S.gallery.hide(),
        "discard-draft": discardDraft,
        "open-draft": openOfferedDraft,
        history: () => historyUi.toggle(), "history-diff": () => historyUi.compare(),
        "version-back": () => historyUi.back(), "version-restore": () => historyUi.restore(),
      };
      const action = actions[target.dataset.action];
      if (action) { e.preventDefault(); action(); }
    });
    S.el.openSelect.addEventListener("change", () => {
      const name = S.el.openSelect.value;
      S.el.openSelect.value = "";
      openSaved(name);
    });
    S.el.upload.addEventListener("change", () => {
      upload(S.el.upload.files && S.el.upload.files[0]);
      S.el.upload.value = "";
    });
    S.el.yaml.addEventListener("input", onYamlInput);
    S.el.yaml.addEventListener("scroll", () => { S.el.gutter.scrollTop = S.el.yaml.scrollTop; });
    S.el.yaml.addEventListener("keydown", (e) => {
      if (e.key === "Tab") {  // indent with spaces instead of leaving the pane
        e.preventDefault();
        const el = S.el.yaml;
        const at = el.selectionStart;
        el.setRangeText("  ", at, el.selectionEnd, "end");
        onYamlInput();
      }
    });
    root.addEventListener("keydown", (e) => {
      if ((e.ctrlKey || e.metaKey) && e.key.toLowerCase() === "s") {
        e.preventDefault();
        save(false);
      }
    });
    window.addEventListener("beforeunload", (e) => {
      if (S.dirty) {
        saveDraft();
        e.preventDefault();
        e.returnValue = "";
      }
    });
  }

  const LEVELS = { info: "ok", warning: "warn", error: "error" };

  /** The editor's API once its ES modules have loaded (static/editor.js imports them after this page starts),
   * or null when they did not load within EDITOR_WAIT_MS. */
  function editorModule() {
    if (window.MetagenEditor && window.MetagenEditor.mount) return Promise.resolve(window.MetagenEditor);
    return new Promise((resolve) => {
      const done = (api) => {
        clearTimeout(timer);
        window.removeEventListener("metagen-editor-ready", onReady);
        resolve(api && api.mount ? api : null);
      };
      const onReady = () => done(window.MetagenEditor);
      const timer = setTimeout(() => done(window.MetagenEditor), EDITOR_WAIT_MS);
      window.addEventListener("metagen-editor-ready", onReady);
      if (window.MetagenEditorReady) window.MetagenEditorReady.then(done, () => done(null));
    });
  }

  async function mountEditor(schema, rules) {
    const editor = await editorModule();
    if (!editor) {
      S.el.canvas.innerHTML = '<div class="mg-canvas-missing">The node-graph editor (static/editor.js) did not load. ' +
        "You can still edit the workflow as YAML on the right.</div>";
      return null;
    }
    try {
      return editor.mount(S.el.canvas, {
        schema: schema,
        rules: rules,
        models: ["main"],
        onChange: onCanvasChange,
        onSelect: (id) => { onSelect(id); historyUi.selected(id); },  // a drawn diff lists the node's changes
        workflows: S.ports,  // sub-workflows (static/subworkflow_ui.js): ports, new children, opening a child
        onMakeSubworkflow: (name, wf) => window.MetagenSubworkflows.make(name, wf),
        onNameSubworkflow: (request) => window.MetagenSubworkflows.name(request),
        onOpenWorkflow: (name) => window.MetagenSubworkflows.open(name),
        onUndoSubworkflow: (name) => window.MetagenSubworkflows.undone(name),
        onRedoSubworkflow: (name) => window.MetagenSubworkflows.redone(name),
        onMessage: (text, level) => notice(String(text || ""), LEVELS[level] || "warn"),
      });
    } catch (err) {
      console.error("metagen editor:", err);
      S.el.canvas.innerHTML = '<div class="mg-canvas-missing"></div>';
      S.el.canvas.firstChild.textContent = "The node-graph editor could not start (" + (err && err.message) +
        "). You can still edit the workflow as YAML on the right.";
      return null;
    }
  }

  async function start(element, server) {
    S.root = element;
    S.server = server;
    bind(element);
    const init = await call("mg_init", {});
    if (init.error) {
      notice(init.error, "error");
      return;
    }
    S.schema = init.schema;
    S.ports = init.workflow_ports || {};
    S.ed = await mountEditor(init.schema, init.rules);
    fillSelect(S.el.openSelect, init.workflows, "Open…");
    S.gallery = window.MetagenGallery.create({ root: element, call: call, openExample: openExample, openTune: openTune });
    if (init.dry_run) notice("Dry run: a scripted fake model answers instead of llama.cpp.", "warn");

    const draft = readDraft();
    let restored = false;
    if (usableDraft(draft) && linkInPage()) {
      offerDraft(draft);  // the link opens what it names (static/share_links.js); the draft waits beside it
    } else if (usableDraft(draft)) {
      restored = await restoreDraft(draft);
    }
    if (!restored) {
      const result = await call("mg_from_editor", { workflow: EMPTY });
      if (!result.error) applyOpened(result, null, false);
      S.gallery.show();  // the first screen: strategies to start from, not an empty canvas (a link hides it again)
    }
    for (const snap of init.active_runs || []) S.runs.push(snap);
    if (S.runs.length) schedulePoll();
    (element.querySelector(".mg-page") || element).setAttribute("data-ready", "1");
    window.dispatchEvent(new CustomEvent("metagen:ready"));
  }

  // ------------------------------------------------------------------ drafts beside a link

  function usableDraft(draft) {
    return !!(draft && typeof draft.yaml === "string" && draft.yaml.trim());
  }

  /** The page's address opens a workflow (?workflow= or ?wf=, static/share_links.js): a draft must not stand
   *  in for it. */
  function linkInPage() {
    const params = new URLSearchParams(window.location.search);
    return ["workflow", "wf"].some((key) => (params.get(key) || "").trim() !== "");
  }

  function draftTitle(draft, workflowName) {
    const title = draft.name || workflowName || "";
    return (title ? " of '" + title + "'" : "") +
      (draft.saved_at ? " from " + new Date(draft.saved_at).toLocaleString() : "");
  }

  function draftButton(action, text) {
    let button = S.el.draft.querySelector("[data-action=" + action + "]");
    if (!button) {
      button = document.createElement("button");
      button.className = "mg-btn";
      button.dataset.action = action;
      button.setAttribute("data-testid", action);
      button.textContent = text;
      S.el.draft.querySelector(".mg-draft-text").after(button);
    }
    return button;
  }

  /** Keep `draft` aside and say so, with a button that opens it. */
  function offerDraft(draft) {
    S.offeredDraft = draft;
    let title = draft.name || "";
    if (!title) {
      const named = /^name:\s*(.+)$/m.exec(draft.yaml);
      title = named ? named[1].trim().replace(/^["']|["']$/g, "") : "";
    }
    S.el.draft.querySelector(".mg-draft-text").textContent = "You have an unsaved draft" +
      draftTitle(draft, title) + ". The link opened its own workflow; your draft is kept.";
    draftButton("open-draft", "Open draft").hidden = false;
    S.el.draft.hidden = false;
  }

  /** Load a stored draft into the editor; false when it no longer parses (it is then left in storage). */
  async function restoreDraft(draft) {
    const linked = draft.origin === "link" && draft.children && typeof draft.children === "object"
      ? draft.children : {};
    const result = await call("mg_parse_yaml", { text: draft.yaml, children: linked });
    if (typeof result.error === "string") return false;
    result.yaml = draft.yaml;
    S.offeredDraft = null;
    applyOpened(result, draft.name, true,
      draft.origin === "upload" || draft.origin === "link" ? draft.origin : "file", linked,
      Object.keys(linked).length ? draft.children_ports : {});
    const open = S.el.draft.querySelector("[data-action=open-draft]");
    if (open) open.hidden = true;
    S.el.draft.hidden = false;
    S.el.draft.querySelector(".mg-draft-text").textContent = "Restored your unsaved draft" +
      draftTitle(draft, result.workflow && result.workflow.name) + ".";
    return true;
  }

  async function openOfferedDraft() {
    const draft = S.offeredDraft;
    if (!draft) return;
    const edited = S.dirty && S.el.yaml.value !== S.openedYaml;  // the linked workflow, changed since it opened
    if (edited && !confirmDiscard()) return;
    if (!(await restoreDraft(draft))) notice("The draft no longer loads; it is kept in this browser.", "error");
  }

  function discardDraft() {
    S.el.draft.hidden = true;
    if (S.offeredDraft) {  // the draft aside goes; what the link opened stays as it is
      S.offeredDraft = null;
      try { localStorage.removeItem(DRAFT_KEY); } catch (e) { /* storage off: nothing to clear */ }
      saveDraft();
    } else {
      setDirty(false);
    }
    notice("Draft discarded.", "ok");
  }

  /** Open YAML from outside the workflows folder (a ?wf= link, a traced run): "link" origin unless told.
   *  `linked`: the sub-workflows a link carried (name -> YAML) and `linkedPorts` their ports: this page's checks
   *  and runs use them instead of the folder's, until another workflow is opened. */
  async function openYaml(text, name, origin, savedName, dirty, linked, linkedPorts) {
    const result = await call("mg_parse_yaml", { text: text, children: linked || {} });
    if (typeof result.error === "string") return notice(result.error, "error");
    result.yaml = text;
    applyOpened(result, savedName || null, dirty === undefined ? true : dirty, origin || "link", linked, linkedPorts);
    notice("Opened " + (name || "the workflow") + " in the editor (not saved yet).", "ok");
  }

  window.MetagenUI = {
    start: start,
    openYaml: openYaml,
    currentYaml: () => (S.el.yaml ? S.el.yaml.value : ""),  // the YAML pane (the Evaluate tab reads it)
    call: call, openSaved: openSaved, openExample: openExample, editor: () => S.ed, notice: notice,
    openVersion: (name, version) => historyUi.view(name, version),  // ?workflow=NAME@VERSION (read-only)
    history: () => historyUi,
    showGallery: () => S.gallery && S.gallery.show(),
    refreshLists: (r) => { fillSelect(S.el.openSelect, r.workflows, "Open…"); applyWorkflowPorts(r.workflow_ports); },
    state: () => ({
      name: S.name, dirty: S.dirty, yamlError: S.yamlError, currentRun: S.currentRun, linked: S.linked,
      linkedPorts: S.linkedPorts, origin: S.origin, draftOffered: !!S.offeredDraft,
      viewing: S.viewing ? Object.assign({}, S.viewing) : null,
      gallery: !!(S.gallery && S.gallery.visible()),
      runs: S.runs.map((r) => ({ run_id: r.run_id, status: r.status })),
    }),
  };
})();
