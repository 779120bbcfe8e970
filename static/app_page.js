/* Metagen Studio — the app page of one workflow (app/ui/app_page.py): the form of its inputs, Run / Cancel with
 * progress, the outputs, and "How it was decided" (HTML the server draws from the run's trace, fetched when opened).
 *
 * Server functions (one JSON payload in, JSON out or {error}): ap_open, ap_run, ap_status, ap_cancel, ap_decided;
 * each gets the page's query, so the server decides which workflow it is (never the browser).
 *
 * Public: window.MetagenApp.start(element, server), .state()
 */
(function () {
  "use strict";

  const POLL_MS = 400;
  const LINK_KEYS = ["app", "workflow", "wf"];
  const STATUS_TEXT = {
    queued: "Waiting in the queue", running: "Running", succeeded: "Done", failed: "Failed",
    cancelled: "Cancelled", budget_exceeded: "Stopped: this app's limit for one run was reached",
    invalid: "Refused", lost: "Lost",
  };

  const S = { server: null, el: {}, info: null, query: {}, run: null, pollTimer: null, decidedFor: null,
    confirmed: false };

  function esc(value) {
    return String(value === null || value === undefined ? "" : value)
      .replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  }

  async function call(fn, payload) {
    try {
      const result = await S.server[fn](Object.assign({ query: S.query }, payload || {}));
      return result || {};
    } catch (err) {
      return { error: "The app did not answer (" + (err && err.message ? err.message : err) +
        "). Is it still running? Try again in a moment." };
    }
  }

  function showError(message) {
    S.el.error.hidden = !message;
    S.el.error.textContent = message || "";
  }

  function setStatus(text, kind) {
    S.el.runBox.hidden = false;
    S.el.status.textContent = text;
    S.el.status.className = "ap-status" + (kind ? " ap-" + kind : "");
  }

  function pageQuery() {
    const params = new URLSearchParams(window.location.search);
    const query = {};
    for (const key of LINK_KEYS) if (params.has(key)) query[key] = params.get(key) || "";
    return query;
  }

  // ------------------------------------------------------------------ the form

  /** "max_tokens" -> "Max tokens"; `keepDashes` for titles ("self-consistency" -> "Self-consistency"). */
  function label(name, keepDashes) {
    const words = String(name).replace(keepDashes ? /_+/g : /[_-]+/g, " ").trim();
    return words.charAt(0).toUpperCase() + words.slice(1);
  }

  function fieldHtml(spec) {
    const id = "ap-in-" + spec.name;
    const def = spec.default === null || spec.default === undefined ? "" :
      (spec.type === "json" ? JSON.stringify(spec.default) : String(spec.default));
    const attrs = ' id="' + esc(id) + '" data-input="' + esc(spec.name) + '" data-testid="app-input-' +
      esc(spec.name) + '"' + (spec.required ? ' required aria-required="true"' : "") +
      (spec.description ? ' aria-describedby="' + esc(id) + '-help"' : "");
    const control = spec.type === "number"
      ? '<input type="number" step="any" inputmode="decimal"' + attrs + ' value="' + esc(def) + '">'
      : '<textarea rows="' + (spec.type === "json" ? 4 : 3) + '"' + attrs +
        (spec.type === "json" ? ' class="ap-mono" spellcheck="false"' : "") + ">" + esc(def) + "</textarea>";
    return '<div class="ap-field" data-field="' + esc(spec.name) + '"><label for="' + esc(id) + '">' +
      esc(label(spec.name)) + (spec.required ? ' <span class="ap-req">required</span>' : "") +
      (spec.type !== "text" ? ' <span class="ap-type">' + esc(spec.type) + "</span>" : "") + "</label>" +
      (spec.description ? '<div class="ap-help" id="' + esc(id) + '-help">' + esc(spec.description) + "</div>" : "") +
      control + '<div class="ap-field-error" data-testid="app-field-error-' + esc(spec.name) + '" hidden></div></div>';
  }

  function renderForm(info) {
    const inputs = info.inputs || [];
    S.el.inputs.innerHTML = inputs.length ? inputs.map(fieldHtml).join("")
      : '<p class="ap-muted">This workflow takes no inputs: press Run.</p>';
    S.el.form.hidden = false;
  }

  function readInputs() {
    const values = {};
    S.el.inputs.querySelectorAll("[data-input]").forEach((el) => {
      const spec = (S.info.inputs || []).find((i) => i.name === el.dataset.input) || {};
      if (spec.type === "number") {
        if (el.validity && el.validity.badInput) values[spec.name] = "(not a number)";
        else if (el.value.trim() === "") values[spec.name] = null;
        else values[spec.name] = Number.isFinite(Number(el.value)) ? Number(el.value) : el.value;
      } else {
        values[spec.name] = el.value;
      }
    });
    return values;
  }

  /** Mark the named fields as needing a value (or clear every mark with an empty list); focus the first. */
  function markMissing(names) {
    S.el.inputs.querySelectorAll("[data-field]").forEach((box) => {
      const bad = names.includes(box.dataset.field);
      box.classList.toggle("ap-invalid", bad);
      const control = box.querySelector("[data-input]");
      if (control) control.setAttribute("aria-invalid", bad ? "true" : "false");
      const note = box.querySelector(".ap-field-error");
      note.hidden = !bad;
      note.textContent = bad ? "Please fill this in: the workflow has no default for it." : "";
    });
    const first = names.length && S.el.inputs.querySelector('[data-field="' + CSS.escape(names[0]) + '"] [data-input]');
    if (first) first.focus();
  }

  // ------------------------------------------------------------------ runs

  async function run(event) {
    if (event) event.preventDefault();
    if (!S.info || S.info.problem) return;
    if (S.run && !S.run.finished) return;
    const values = readInputs();
    const missing = (S.info.inputs || []).filter((i) => i.required &&
      (values[i.name] === null || String(values[i.name]).trim() === "")).map((i) => i.name);
    markMissing(missing);
    if (missing.length) {
      setStatus("Fill in " + missing.map(label).join(", ") + " first.", "bad");
      return;
    }
    S.el.runBtn.disabled = true;
    setStatus("Starting…");
    let snap = await call("ap_run", { inputs: values, confirmed_python: S.confirmed });
    if (snap.needs_confirmation) snap = await confirmAndRun(snap, values);
    S.el.runBtn.disabled = false;
    if (!snap) return;
    if (snap.fields) markMissing(snap.fields);
    if (snap.needs_pull) {
      setStatus("This workflow needs " + snap.needs_pull.map((n) => n.label).join(", ") +
        ", which is not on this computer yet: pull it on the studio's Models tab, then run again.", "bad");
      return;
    }
    if (snap.error && !snap.run_id) {
      setStatus(snap.error, "bad");
      return;
    }
    S.run = snap;
    S.decidedFor = null;
    S.el.outputs.innerHTML = "";
    S.el.decided.hidden = true;
    S.el.decided.open = false;
    showRun(snap);
    schedulePoll();
  }

  async function confirmAndRun(snap, values) {
    const code = (snap.code || []).map((c) => "[" + c.node_id + "]\n" + c.code).join("\n\n");
    const remote = (snap.remote || []).map((r) => r.base_url + " (" + r.model + ")").join("\n");
    const ok = window.confirm("This workflow came from a link" +
      (code ? " and runs this Python code on this computer:\n\n" + code : "") +
      (remote ? (code ? "\n\nIt also" : " and") + " sends its prompts to:\n\n" + remote : "") +
      "\n\nRun it only if you trust where it came from. Run it?");
    if (!ok) {
      setStatus("Not run: you did not accept what the workflow would do.", "warn");
      return null;
    }
    S.confirmed = true;
    return call("ap_run", { inputs: values, confirmed_python: true });
  }

  async function cancel() {
    if (!S.run || S.run.finished) return;
    S.el.cancelBtn.disabled = true;
    const snap = await call("ap_cancel", { run_id: S.run.run_id });
    if (snap.error && !snap.run_id) return setStatus(snap.error, "bad");
    setStatus("Cancelling…");
  }

  function schedulePoll() {
    clearTimeout(S.pollTimer);
    S.pollTimer = setTimeout(poll, POLL_MS);
  }

  async function poll() {
    if (!S.run || S.run.finished) return;
    const snap = await call("ap_status", { run_id: S.run.run_id });
    if (snap.error && !snap.run_id) {
      setStatus(snap.error + " Retrying…", "warn");
      schedulePoll();
      return;
    }
    S.run = snap;
    showRun(snap);
    if (!snap.finished) schedulePoll();
  }

  function progressText(snap) {
    let text = STATUS_TEXT[snap.status] || snap.status;
    if (snap.status === "queued" && snap.queue_position) text += " (position " + snap.queue_position + ")";
    if (!snap.finished && snap.status !== "queued") {
      text += " · step " + snap.done + " of " + snap.total;
      const running = Object.entries(snap.nodes || {}).filter(([, n]) => n.state === "running");
      if (running.length) text += " · " + running.map(([id, n]) => id + " " + (n.tokens || 0) + " tokens").join(", ");
    }
    if (snap.finished && snap.elapsed_s) text += " in " + Number(snap.elapsed_s).toFixed(1) + " s";
    const states = Object.values(snap.nodes || {}).map((n) => n.state);
    if (snap.status === "succeeded" && states.length && states.every((st) => st === "cached")) {
      text += " · the same question was answered before, so this is that answer again";
    }
    if (snap.error) text += ". " + snap.error;
    return text;
  }

  // A YAML description's hard line breaks are where its author's editor wrapped, not where the text ends: blank
  // lines part paragraphs, a line starting "- " or "* " is a list item, and every other break is a space (at
  // phone width a line no longer ends mid-sentence).
  function descriptionBlocks(text) {
    return String(text).replace(/\r\n?/g, "\n").split(/\n\s*\n/).map((para) => {
      const lines = para.split("\n").map((ln) => ln.trim()).filter(Boolean);
      const items = lines.filter((ln) => /^[-*] /.test(ln));
      if (items.length && items.length === lines.length) return { list: items.map((ln) => ln.slice(2)) };
      return { text: lines.join(" ") };
    }).filter((b) => b.list || b.text);
  }

  function renderDescription(el, text) {
    el.textContent = "";
    for (const block of descriptionBlocks(text)) {
      if (block.list) {
        const ul = document.createElement("ul");
        for (const item of block.list) ul.appendChild(document.createElement("li")).textContent = item;
        el.appendChild(ul);
      } else {
        el.appendChild(document.createElement("p")).textContent = block.text;
      }
    }
    el.hidden = !el.childNodes.length;
  }

  function showRun(snap) {
    const pct = snap.finished ? 100 : Math.round((snap.progress || 0) * 100);
    S.el.bar.style.width = pct + "%";
    S.el.progress.setAttribute("aria-valuenow", String(pct));
    S.el.progress.className = "ap-progress ap-" + snap.status;
    const bad = ["failed", "invalid", "lost", "budget_exceeded"].includes(snap.status);
    setStatus(progressText(snap), bad ? "bad" : (snap.status === "succeeded" ? "ok" : ""));
    S.el.status.dataset.status = snap.status;
    S.el.cancelBtn.disabled = !!snap.finished;
    S.el.runBtn.disabled = !snap.finished;
    S.el.runBtn.textContent = snap.finished ? "Run again" : "Running…";
    if (snap.finished) {
      renderOutputs(snap.output_views || []);
      S.el.decided.hidden = false;
      if (S.el.decided.open) loadDecided();
    }
  }

  // ------------------------------------------------------------------ outputs and how it was decided

  // A tool-call answer (the service's `tool_answer`): its text, then each call as its name and its arguments.
  function toolAnswerHtml(answer, port) {
    const calls = answer.tool_calls || [];
    const content = String(answer.content || "").trim();
    const text = content ? '<div class="ap-call-text">' + esc(content) + "</div>" : "";
    const items = calls.map((call) => {
      const args = Object.entries(call.arguments || {}).map(([key, value]) =>
        '<div class="ap-arg"><dt>' + esc(key) + "</dt><dd><code>" + esc(JSON.stringify(value)) + "</code></dd></div>");
      return '<li class="ap-call" data-testid="app-call" title="' + esc(call.text || "") + '">' +
        '<span class="ap-call-label">Calls</span> <code class="ap-call-name" data-testid="app-call-name">' +
        esc(call.name) + "</code>" +
        (args.length ? '<dl class="ap-call-args">' + args.join("") + "</dl>"
          : '<div class="ap-muted">no arguments</div>') + "</li>";
    });
    return '<div class="ap-answer ap-tool-answer" data-testid="app-output-' + esc(port) + '">' + text +
      (items.length ? '<ul class="ap-calls">' + items.join("") + "</ul>" : (text ? "" : "(no call)")) + "</div>";
  }

  function outputHtml(view, index) {
    const title = '<div class="ap-port">' + esc(label(view.port)) + "</div>";
    if (view.tool_answer) {
      return '<div class="ap-output" data-port="' + esc(view.port) + '">' + title +
        toolAnswerHtml(view.tool_answer, view.port) + "</div>";
    }
    if (view.type === "candidates") {
      const won = (view.rows || []).find((r) => r.winner);
      if (won && won.tool_answer) {
        return '<div class="ap-output" data-port="' + esc(view.port) + '">' + title +
          toolAnswerHtml(won.tool_answer, view.port) +
          '<div class="ap-muted">The chosen one of ' + (view.rows || []).length + " candidates.</div></div>";
      }
      return '<div class="ap-output" data-port="' + esc(view.port) + '">' + title +
        '<div class="ap-answer" data-testid="app-output-' + esc(view.port) + '">' +
        esc(won ? won.text : "(no candidate was chosen)") + "</div>" +
        '<div class="ap-muted">The chosen one of ' + (view.rows || []).length + " candidates.</div></div>";
    }
    const text = String(view.text || "");
    const structured = /^[[{]/.test(text.trim());
    if (structured && index > 0) {
      return '<details class="ap-output ap-more" data-port="' + esc(view.port) + '"><summary>' + esc(label(view.port)) +
        '</summary><pre data-testid="app-output-' + esc(view.port) + '">' + esc(text) + "</pre></details>";
    }
    return '<div class="ap-output" data-port="' + esc(view.port) + '">' + title +
      "<" + (structured ? "pre" : "div") + ' class="ap-answer" data-testid="app-output-' + esc(view.port) + '">' +
      esc(text === "" ? "(empty)" : text) + "</" + (structured ? "pre" : "div") + "></div>";
  }

  function renderOutputs(views) {
    S.el.outputs.innerHTML = views.length ? views.map(outputHtml).join("") : "";
  }

  async function loadDecided() {
    if (!S.run || !S.run.finished || S.decidedFor === S.run.run_id) return;
    const runId = S.run.run_id;
    S.decidedFor = runId;
    S.el.decidedBody.textContent = "Loading…";
    const result = await call("ap_decided", { run_id: runId });
    if (!S.run || S.run.run_id !== runId) return;
    if (result.error) {
      S.decidedFor = null;
      S.el.decidedBody.textContent = result.error;
      return;
    }
    S.el.decidedBody.innerHTML = result.html || "";
    S.el.decidedBody.dataset.run = runId;
  }

  // ------------------------------------------------------------------ start-up

  function bind(root) {
    const q = (id) => root.querySelector('[data-testid="' + id + '"]');
    S.el = {
      title: q("app-title"), studio: q("studio-link"), desc: q("app-description"), error: q("app-error"),
      form: q("app-form"), inputs: q("app-inputs"), runBtn: q("app-run"), cancelBtn: q("app-cancel"),
      runBox: q("app-run-box"), progress: q("app-progress"), status: q("app-status"),
      outputs: q("app-outputs"), decided: q("app-decided"), decidedBody: q("app-decided-body"), policy: q("app-policy"),
    };
    S.el.bar = S.el.progress.querySelector(".ap-bar");
    S.el.form.addEventListener("submit", run);
    S.el.cancelBtn.addEventListener("click", cancel);
    S.el.decided.addEventListener("toggle", () => { if (S.el.decided.open) loadDecided(); });
    S.el.inputs.addEventListener("input", (e) => {
      const box = e.target.closest(".ap-invalid");
      if (box && e.target.value.trim() !== "") {
        box.classList.remove("ap-invalid");
        e.target.setAttribute("aria-invalid", "false");
        box.querySelector(".ap-field-error").hidden = true;
      }
    });
    S.el.inputs.addEventListener("keydown", (e) => {  // Ctrl+Enter runs from a text field
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) run(e);
    });
  }

  async function start(element, server) {
    S.server = server;
    S.query = pageQuery();
    bind(element);
    const info = await call("ap_open", {});
    const page = element.querySelector(".ap-page") || element;
    if (info.error) {
      S.el.title.textContent = "This link does not open an app";
      showError(info.error);
      page.setAttribute("data-ready", "1");
      return;
    }
    S.info = info;
    S.el.title.textContent = label(info.title || info.name || "Workflow", true);
    document.title = S.el.title.textContent + " · Metagen";
    renderDescription(S.el.desc, info.description || "");
    if (info.studio_url) {
      S.el.studio.href = info.studio_url;
      S.el.studio.hidden = false;
    }
    S.el.policy.textContent = info.policy || "";
    renderForm(info);
    if (info.problem) {
      showError(info.problem);
      S.el.runBtn.disabled = true;
    }
    page.setAttribute("data-ready", "1");
  }

  window.MetagenApp = {
    start: start,
    state: () => ({ info: S.info, run: S.run ? { run_id: S.run.run_id, status: S.run.status } : null }),
  };
})();
