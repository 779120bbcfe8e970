/* The editor page's run panel: the run form (inputs, seed), starting, polling and cancelling runs, the run list,
 * and the outputs of the run and of the selected node. ui_bridge.js creates it with the page's state and helpers.
 *
 * window.MetagenRunPanel.create(ctx) -> { renderInputs, run, cancel, schedulePoll, showRun, clearRunView, onSelect }
 * ctx: { S (the page state), call, notice, currentWorkflow, isEmptyWorkflow }
 */
(function () {
  "use strict";

  const POLL_MS = 350;
  const CALL_TIMEOUT_MS = 5000;  // a status call unanswered this long is retried (a dead server never answers)

  function connection() {
    return window.MetagenConnection;  // static/connection.js (scripts load async: looked up when needed)
  }

  function withTimeout(promise, ms) {
    let timer;
    const timeout = new Promise((resolve) => { timer = setTimeout(() => resolve({ timed_out: true }), ms); });
    return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
  }

  function create(ctx) {
    const { S, call, notice, currentWorkflow, isEmptyWorkflow } = ctx;
    const { esc, renderOutputs } = window.MetagenRunOutputs;  // static/run_outputs.js

    // ------------------------------------------------------------------ run form

    /** The run form for the workflow's declared inputs. `reset` (another workflow was opened): every field shows
     *  the new workflow's default. Otherwise (the same workflow, edited) a field the user changed keeps its text and
     *  the others follow their (maybe edited) defaults. */
    function renderInputs(inputs, reset) {
      const box = S.el.inputs;
      const names = Object.keys(inputs);
      const sig = JSON.stringify(inputs);
      if (box.dataset.sig === sig && !reset) return;
      const typed = {};  // what the user typed over a default, by input name
      box.querySelectorAll("[data-input]").forEach((el) => {
        if (el.value !== el.dataset.default) typed[el.dataset.input] = el.value;
      });
      box.dataset.sig = sig;
      S.inputs = inputs;
      if (!names.length) {
        box.innerHTML = '<span class="mg-muted">This workflow declares no inputs.</span>';
        return;
      }
      box.innerHTML = names.map((name) => {
        const spec = inputs[name] || {};
        const required = spec.default === null || spec.default === undefined;
        const label = '<span class="mg-label">' + esc(name) + ' <em>' + esc(spec.type) + "</em>" +
          (required ? ' <em class="mg-required" title="no default: give it a value">required</em>' : "") + "</span>";
        const title = spec.description ? ' title="' + esc(spec.description) + '"' : "";
        if (spec.type === "number") {
          return '<label class="mg-field"' + title + ">" + label + '<input type="number" step="any" data-input="' +
            esc(name) + '" data-testid="input-' + esc(name) + '"></label>';
        }
        return '<label class="mg-field mg-wide"' + title + ">" + label + '<textarea rows="2" data-input="' +
          esc(name) + '" data-testid="input-' + esc(name) + '"' + (spec.type === "json" ? ' class="mg-mono"' : "") +
          "></textarea></label>";
      }).join("");
      box.querySelectorAll("[data-input]").forEach((el) => {
        const name = el.dataset.input;
        const spec = inputs[name] || {};
        const def = spec.default === null || spec.default === undefined ? "" :
          (spec.type === "json" ? JSON.stringify(spec.default) : String(spec.default));
        const keep = !reset && name in typed;
        el.value = keep ? typed[name] : def;
        el.dataset.default = keep ? def : el.value;  // untouched while it reads this (a number field as it reads back)
      });
    }

    /** The required inputs (no default) left empty, highlighted until typed in; [] when all are given. */
    function missingRequired() {
      const missing = [];
      S.el.inputs.querySelectorAll("[data-input]").forEach((el) => {
        const spec = S.inputs[el.dataset.input] || {};
        const empty = (spec.default === null || spec.default === undefined) && !String(el.value).trim() &&
          !(el.validity && el.validity.badInput);
        if (empty) {
          missing.push(el.dataset.input);
          el.setAttribute("aria-invalid", "true");
          el.addEventListener("input", () => el.removeAttribute("aria-invalid"), { once: true });
        } else {
          el.removeAttribute("aria-invalid");
        }
      });
      return missing;
    }

    function readInputs() {
      const values = {};
      S.el.inputs.querySelectorAll("[data-input]").forEach((el) => {
        const spec = S.inputs[el.dataset.input] || {};
        if (spec.type === "number") {
          // send what cannot be a finite number as typed, so the server says what is wrong; Number("1e999") is
          // Infinity, which JSON sends as null, and a half-typed "1e" reads as "": both silently ran the default
          const number = Number(el.value);
          if (el.validity && el.validity.badInput) values[el.dataset.input] = "(not a number)";
          else if (el.value === "") values[el.dataset.input] = null;
          else values[el.dataset.input] = Number.isFinite(number) ? number : el.value;
        } else {
          values[el.dataset.input] = el.value;
        }
      });
      return values;
    }

    // ------------------------------------------------------------------ runs

    async function run() {
      if (S.yamlError) {
        notice("Fix the YAML error" + (S.yamlError.line ? " on line " + S.yamlError.line : "") + " before running.",
          "error");
        return;
      }
      if (isEmptyWorkflow()) {
        notice("This workflow is empty: pick one under 'New from example…' or drag nodes in from the palette.",
          "error");
        S.problemsNotice = true;
        return;
      }
      if (S.errorCount) {
        const first = S.firstError;
        const text = "Fix the " + (S.errorCount === 1 ? "problem" : S.errorCount + " problems") +
          " listed under Problems before running" + (first ? (S.errorCount > 1 ? "; the first: " : ": ") +
          (first.node_id ? "[" + first.node_id + "] " : "") + first.message : "") + ".";
        S.el.runText.textContent = text;
        S.el.runText.className = "mg-run-text mg-bad";
        notice(text, "error");
        S.problemsNotice = true;
        return;
      }
      const missing = missingRequired();
      if (missing.length) {
        const text = "Input " + missing.map((n) => "'" + n + "'").join(", ") + (missing.length > 1 ? " are" : " is") +
          " required (no default): type a value before running.";
        S.el.runText.textContent = text;
        S.el.runText.className = "mg-run-text mg-bad";
        S.el.inputs.querySelector("[aria-invalid=true]").focus();
        return notice(text, "error");
      }
      const seed = parseInt(S.el.seed.value || "0", 10);
      S.el.runBtn.disabled = true;
      const request = { workflow: currentWorkflow(), inputs: readInputs(), seed: isNaN(seed) ? 0 : seed,
        origin: S.origin, confirmed_python: S.pythonConfirmed };
      let snap = await call("mg_run", request);
      if (snap.needs_pull) {
        // a `source: hub` model that is not in the models folder yet: say which and how large, pull on a yes
        if (!(await pullNeeded(snap.needs_pull))) {
          S.el.runBtn.disabled = false;
          return;
        }
        snap = await call("mg_run", request);
      }
      if (snap.needs_confirmation) {
        // a workflow from a link or an upload runs python here, or calls another server: show it, run only if accepted
        const code = (snap.code || []).map((c) => "[" + c.node_id + "]\n" + c.code).join("\n\n");
        const remote = (snap.remote || []).map((r) => "[model " + r.alias + "] " + r.base_url + " (" + r.model + ")" +
          (r.api_key_env ? ", sending the key in $" + r.api_key_env : "")).join("\n");
        const ok = window.confirm("This workflow came from " + (S.origin === "upload" ? "an uploaded file" : "a link") +
          (code ? " and runs this Python code on your computer, with your file permissions:\n\n" + code : "") +
          (remote ? (code ? "\n\nIt also" : " and") + " sends your prompts to these servers:\n\n" + remote : "") +
          "\n\nRun it only if you trust where it came from. Run it?");
        if (!ok) {
          S.el.runBtn.disabled = false;
          return notice("Not run: the workflow's " + (code ? "python code" : "remote servers") + " were not accepted.",
            "warn");
        }
        S.pythonConfirmed = true;
        snap = await call("mg_run", { ...request, confirmed_python: true });
      }
      S.el.runBtn.disabled = false;
      if (snap.error && !snap.run_id) {
        S.el.runText.textContent = snap.error;
        S.el.runText.className = "mg-run-text mg-bad";
        S.problemsNotice = /^the workflow has problems/.test(snap.error);
        return notice(snap.error, "error");
      }
      S.runs.push(snap);
      S.currentRun = snap.run_id;
      remember();
      if (S.ed && S.ed.clearRunState) S.ed.clearRunState();
      S.el.outputs.innerHTML = "";
      S.el.nodeOutputs.innerHTML = "";
      showRun(snap);
      schedulePoll();
    }

    function sizeText(bytes) {
      if (bytes === null || bytes === undefined) return "size unknown";
      return bytes >= 1e9 ? (bytes / 1e9).toFixed(1) + " GB" : Math.max(1, Math.round(bytes / 1e6)) + " MB";
    }

    async function pullNeeded(needs) {
      const names = needs.map((n) => n.label + " (" + sizeText(n.size_bytes) + ") from " + n.repo).join("\n");
      const text = "This workflow needs " + names.replace(/\n/g, ", ");
      S.el.runText.textContent = text + " — Pull";
      S.el.runText.className = "mg-run-text";
      if (!window.confirm("This workflow needs:\n\n" + names + "\n\nPull " + (needs.length > 1 ? "them" : "it") +
          " into the models folder now?")) {
        notice("Not run: " + text + ". Pull it here, or on the Models tab.", "warn");
        return false;
      }
      notice("Pulling " + needs.map((n) => n.label).join(", ") + "…", "ok");
      S.el.runText.textContent = "Pulling " + needs.map((n) => n.label).join(", ") + "…";
      const got = await call("mg_pull_needed", { workflow: currentWorkflow() });
      if (got.error) {
        S.el.runText.textContent = got.error;
        S.el.runText.className = "mg-run-text mg-bad";
        notice(got.error, "error");
        return false;
      }
      notice("Pulled " + (got.pulled || []).map((p) => p.file).join(", ") + ".", "ok");
      return true;
    }

    async function cancel() {
      const target = S.runs.slice().reverse().find((r) => r.run_id === S.currentRun && !r.finished) ||
        S.runs.slice().reverse().find((r) => !r.finished);
      if (!target) return;
      S.el.cancelBtn.disabled = true;
      const snap = await call("mg_cancel", { run_id: target.run_id });
      if (snap.error && !snap.run_id) return notice(snap.error, "error");
      updateRun(snap);
      notice("Cancelling run " + target.run_id + "…", "ok");
    }

    function schedulePoll() {
      if (S.pollTimer) return;
      S.pollTimer = setTimeout(poll, POLL_MS);
    }

    function showConnectionLost() {
      const lostText = connection() ? connection().LOST_TEXT : "Lost the connection to the studio server";
      const current = S.runs.find((r) => r.run_id === S.currentRun && !r.finished);
      S.el.runText.textContent = (current ? "Run " + current.run_id + ": " : "") + lostText;
      S.el.runText.className = "mg-run-text mg-bad";
      S.el.runText.dataset.status = "disconnected";
    }

    function detached() {
      return S.el.runText && !S.el.runText.isConnected;  // Gradio re-rendered the app: a newer panel took over
    }

    async function poll() {
      S.pollTimer = null;
      if (detached()) return;
      const active = S.runs.filter((r) => !r.finished);
      for (const r of active) {
        if (connection() && connection().isLost()) {
          showConnectionLost();
          break;  // polled again when the connection is back (and meanwhile, slowly)
        }
        const snap = await withTimeout(call("mg_status", { run_id: r.run_id }), CALL_TIMEOUT_MS);
        if (snap.timed_out || (connection() && connection().isLost())) {
          if (connection() && connection().isLost()) showConnectionLost();
          break;  // no answer: not a verdict on the run; asked again on the next poll
        }
        if (snap.error && !snap.run_id) {
          if (!/^no live run/.test(snap.error)) break;  // the app did not answer: asked again on the next poll
          // the server does not know the run (restarted since): it ended with the studio that ran it
          updateRun(Object.assign({}, r, { finished: true, status: "lost", nodes: {}, output_views: [],
            error: "ended when the studio stopped (" + snap.error + ")" }));
          continue;
        }
        if (!snap.run_id) break;  // an empty answer (a server coming back up): not a verdict; asked again
        updateRun(snap);
      }
      if (S.runs.some((r) => !r.finished)) schedulePoll();
    }

    function updateRun(snap) {
      const i = S.runs.findIndex((r) => r.run_id === snap.run_id);
      if (i >= 0) S.runs[i] = snap; else S.runs.push(snap);
      remember();
      if (snap.run_id === S.currentRun) showRun(snap);
      renderRunList();
    }

    const STATUS_TEXT = {
      queued: "queued", running: "running", succeeded: "done", failed: "failed", cancelled: "cancelled",
      budget_exceeded: "stopped: budget exceeded", invalid: "invalid", lost: "lost",
    };

    function showRun(snap) {
      const pct = Math.round((snap.progress || 0) * 100);
      S.el.progressBar.style.width = pct + "%";
      S.el.progress.setAttribute("aria-valuenow", String(pct));
      S.el.progress.className = "mg-progress mg-" + snap.status;
      let text = "Run " + snap.run_id + ": " + (STATUS_TEXT[snap.status] || snap.status);
      if (snap.status === "queued" && snap.queue_position) text += " (position " + snap.queue_position + " in the queue)";
      if (!snap.finished && snap.status !== "queued") text += " · " + snap.done + "/" + snap.total + " nodes · " + pct + "%";
      const expected = snap.expected_s ? Number(snap.expected_s).toFixed(1) + " s" : "";
      if (!snap.finished && expected) text += " · expected " + expected + " (at the speed measured here)";
      if (snap.finished && snap.elapsed_s) {
        text += " in " + Number(snap.elapsed_s).toFixed(1) + " s" + (expected ? " (estimated " + expected + ")" : "");
      }
      const states = Object.values(snap.nodes || {}).map((n) => n.state);
      if (snap.status === "succeeded" && states.length && states.every((st) => st === "cached")) {
        // an instant identical answer looks broken unless it says why
        text += " · every node from the cache (same workflow, inputs and seed; change the seed for new samples)";
      }
      if (snap.error) text += " — " + snap.error;
      S.el.runText.textContent = text;
      S.el.runText.className = "mg-run-text" + (["failed", "invalid", "lost"].includes(snap.status) ? " mg-bad" : "");
      S.el.runText.dataset.status = snap.status;
      showTraceLink(snap.run_id);
      S.el.cancelBtn.disabled = !S.runs.some((r) => !r.finished);
      if (S.ed && S.ed.setRunState && snap.nodes) S.ed.setRunState(snap.nodes);
      if (snap.finished) {
        renderOutputs(S.el.outputs, snap.output_views || [], "Outputs");
        if (S.selectedNode) showNodeOutputs(S.selectedNode);
      } else {
        const running = Object.entries(snap.nodes || {}).filter(([, n]) => n.state === "running");
        S.el.outputs.innerHTML = running.map(([id, n]) =>
          '<div class="mg-partial" data-testid="partial-output"><strong>' + esc(id) + "</strong> · " +
          esc(n.tokens) + " tokens" + (n.message ? " · " + esc(n.message) : "") +
          "<pre>" + esc(n.text) + "</pre></div>").join("");
      }
      renderRunList();
    }

    /** "Open its trace" beside the run's status: the Traces tab on this run, in a new browser tab (the editor stays
     *  as it is); hidden when no run is shown. */
    function showTraceLink(runId) {
      let link = S.el.traceLink;
      if (!link || !link.isConnected) {
        link = document.createElement("a");
        link.className = "mg-trace-link";
        link.dataset.testid = "run-trace-link";
        link.target = "_blank";
        link.rel = "noopener";
        link.textContent = "Open its trace";
        link.title = "The Traces tab on this run (a new browser tab)";
        S.el.runText.insertAdjacentElement("afterend", link);
        S.el.traceLink = link;
      }
      link.hidden = !runId;
      if (runId) link.href = "?run=" + encodeURIComponent(runId);
    }

    function renderRunList() {
      if (S.runs.length < 2) { S.el.runList.innerHTML = ""; return; }
      S.el.runList.innerHTML = S.runs.slice(-8).reverse().map((r) =>
        '<button class="mg-run-chip mg-' + esc(r.status) + (r.run_id === S.currentRun ? " mg-current" : "") +
        '" data-run="' + esc(r.run_id) + '">' + esc(r.run_id) + " · " + esc(STATUS_TEXT[r.status] || r.status) +
        "</button>").join("");
    }

    function clearRunView() {
      S.currentRun = null;
      if (S.ed && S.ed.clearRunState) S.ed.clearRunState();
      S.el.outputs.innerHTML = "";
      S.el.nodeOutputs.innerHTML = "";
      S.el.progressBar.style.width = "0%";
      S.el.runText.textContent = S.runs.some((r) => !r.finished) ? "A run is still going (see the list)." : "No run yet.";
      S.el.runText.dataset.status = "";
      showTraceLink(null);
    }

    async function showNodeOutputs(nodeId) {
      const box = S.el.nodeOutputs;
      if (!nodeId) { box.innerHTML = ""; return; }
      const snap = S.runs.find((r) => r.run_id === S.currentRun);
      if (!snap) {
        box.innerHTML = '<span class="mg-muted">Run the workflow to see what ' + esc(nodeId) + " produces.</span>";
        return;
      }
      if (!(snap.has_outputs || []).includes(nodeId)) {
        box.innerHTML = '<span class="mg-muted">' + esc(nodeId) + " has no outputs in run " + esc(snap.run_id) +
          (snap.finished ? "." : " yet.") + "</span>";
        return;
      }
      const result = await call("mg_node_outputs", { run_id: snap.run_id, node_id: nodeId });
      if (result.error) { box.textContent = result.error; return; }
      if (S.selectedNode !== nodeId) return;
      renderOutputs(box, result.views || [], "Outputs of " + nodeId);
    }

    function onSelect(arg) {
      let nodeId = arg;
      if (Array.isArray(arg)) nodeId = arg.length === 1 ? arg[0] : null;
      else if (arg && typeof arg === "object") nodeId = arg.id || arg.node_id || null;
      S.selectedNode = nodeId || null;
      showNodeOutputs(S.selectedNode);
    }

    // ------------------------------------------------------------------ runs across a re-render of the page

    const LIVE_KEY = "mg-live-runs";  // this tab's unfinished runs: Gradio re-renders the app when a restarted
                                      // server answers, and the panel must then still show how they ended

    function remember() {
      if (detached()) return;
      try {
        // the unfinished runs, and those just found lost (the page may re-render right after it learnt that)
        const kept = S.runs.filter((r) => r.run_id && (!r.finished || (r.status === "lost" && !r.restored)))
          .map((r) => ({ run_id: r.run_id, status: r.status, finished: !!r.finished, error: r.error || null }));
        if (kept.length) sessionStorage.setItem(LIVE_KEY, JSON.stringify({ runs: kept, current: S.currentRun }));
        else sessionStorage.removeItem(LIVE_KEY);
      } catch (e) { /* storage off: the panel starts afresh */ }
    }

    function restoreRuns() {
      let saved = null;
      try { saved = JSON.parse(sessionStorage.getItem(LIVE_KEY) || "null"); } catch (e) { saved = null; }
      if (!saved || !Array.isArray(saved.runs) || !saved.runs.length || S.runs.length) return;  // the server's own
      saved.runs = saved.runs.filter((r) => r && typeof r.run_id === "string" && r.run_id);
      if (!saved.runs.length) return;
      saved.runs.forEach((r) => S.runs.push({ run_id: r.run_id, status: r.finished ? r.status : "running",
        finished: !!r.finished, error: r.error, restored: !!r.finished, progress: r.finished ? 1 : 0, done: 0,
        total: 0, nodes: {}, output_views: [] }));
      const ids = saved.runs.map((r) => r.run_id);
      S.currentRun = ids.includes(saved.current) ? saved.current : ids[ids.length - 1];
      showRun(S.runs.find((r) => r.run_id === S.currentRun));
      remember();
      schedulePoll();
    }
    window.addEventListener("metagen:ready", restoreRuns, { once: true });  // after the page's init (its runs)

    function watchConnection() {
      const conn = connection();
      if (!conn) { setTimeout(watchConnection, 200); return; }
      conn.onChange((state) => {
        if (!S.runs.some((r) => !r.finished)) return;
        if (state === "lost") showConnectionLost();
        else {  // back: the runs' real state at once (a restarted server reads it from the traces, or knows none)
          clearTimeout(S.pollTimer);
          S.pollTimer = null;
          poll();
        }
      });
    }
    watchConnection();

    return { renderInputs, run, cancel, schedulePoll, showRun, clearRunView, onSelect };
  }

  window.MetagenRunPanel = { create: create };
})();
