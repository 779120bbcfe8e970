/* Metagen Studio — share links and deep links on the editor page.
 *
 * On page load, `?workflow=NAME` opens a saved workflow or an example (`NAME@VERSION`: that saved version,
 * read-only, static/history_panel.js), `?wf=<payload>` opens the workflow
 * carried in the link with the sub-workflows it carries (shown in the editor, never run; the page's checks and
 * runs use those children before the folder's), and errors (tampered / oversized / unknown) are shown
 * in the notice bar. `?run=ID` is opened by the server in the Traces tab (app/share_ui.py).
 * The "Copy share link" button makes a link for the editor's workflow (and the current run's trace).
 *
 * Public: window.MetagenShare.start(element, server)
 */
(function () {
  "use strict";

  const LINK_KEYS = ["workflow", "wf", "run"];
  const READY_TIMEOUT_MS = 30000;

  function editorReady() {
    return !!(window.MetagenUI && document.querySelector('.mg-page[data-ready="1"]'));
  }

  function whenEditorReady() {
    return new Promise((resolve) => {
      if (editorReady()) return resolve(true);
      const started = Date.now();
      const onReady = () => { window.removeEventListener("metagen:ready", onReady); resolve(true); };
      window.addEventListener("metagen:ready", onReady);
      const poll = setInterval(() => {  // the event may have fired before this script ran
        if (editorReady() || Date.now() - started > READY_TIMEOUT_MS) {
          clearInterval(poll);
          window.removeEventListener("metagen:ready", onReady);
          resolve(editorReady());
        }
      }, 100);
    });
  }

  function notice(message, kind) {
    const el = document.querySelector('[data-testid="notice"]');
    if (!el) return;
    el.textContent = message;
    el.className = "mg-notice" + (kind ? " mg-" + kind : "");
  }

  function linkQuery() {
    const params = new URLSearchParams(window.location.search);
    const query = {};
    let any = false;
    for (const key of LINK_KEYS) {
      if (params.has(key)) {
        query[key] = params.get(key) || "";
        any = true;
      }
    }
    return any ? query : null;
  }

  function forgetLinkQuery() {
    // after opening, a reload should restore the visitor's draft rather than re-open the link
    const url = new URL(window.location.href);
    for (const key of ["workflow", "wf"]) url.searchParams.delete(key);
    window.history.replaceState(window.history.state, "", url.toString());
  }

  function chooseInSelect(testid, name) {
    const select = document.querySelector('[data-testid="' + testid + '"]');
    if (!select) return false;
    if (!Array.from(select.options).some((o) => o.value === name)) {
      const option = document.createElement("option");
      option.value = name;
      option.textContent = name;
      select.appendChild(option);
    }
    select.value = name;
    select.dispatchEvent(new Event("change", { bubbles: true }));
    return true;
  }

  async function openDeepLink(server) {
    const query = linkQuery();
    if (!query) return;
    let result;
    try {
      result = await server.sl_open_link({ query: query });
    } catch (err) {
      result = { error: "the app did not answer (" + (err && err.message ? err.message : err) + ")" };
    }
    if (!result || !result.kind || result.kind === "run") return;  // runs open in the Traces tab
    const ready = await whenEditorReady();
    if (result.error) {
      notice("Cannot open this link: " + result.error, "error");
      return;
    }
    if (!ready) {
      notice("Cannot open this link: the editor did not start.", "error");
      return;
    }
    if (result.kind === "workflow") {
      if (result.source === "version") await window.MetagenUI.openVersion(result.name, result.version);
      else if (result.source === "example") await window.MetagenUI.openExample(result.name);
      else chooseInSelect("open-select", result.name);
    } else if (result.kind === "wf") {
      const state = window.MetagenUI.state();
      if (state.dirty && !window.confirm("Replace your unsaved changes with the workflow from the link?")) return;
      await window.MetagenUI.openYaml(result.yaml, "the workflow from the link", "link", null, true,
        result.children || {}, result.workflow_ports || {});
      notice("Opened the workflow from the link in the editor. It has not been run: review it, then press Run.",
             "ok");
    }
    forgetLinkQuery();
  }

  async function copyText(text, input) {
    try {
      if (navigator.clipboard && window.isSecureContext) {
        await navigator.clipboard.writeText(text);
        return true;
      }
    } catch (err) { /* permission denied: fall back below */ }
    try {
      input.focus();
      input.select();
      return document.execCommand("copy");
    } catch (err) {
      return false;
    }
  }

  function bindShareButton(element, server) {
    const share = element.querySelector(".mg-share");
    const toolbar = document.querySelector('[data-testid="editor-page"] .mg-toolbar');
    if (share && toolbar) {
      const spacer = toolbar.querySelector(".mg-spacer");
      toolbar.insertBefore(share, spacer || null);
    }
    const root = share || element;
    const box = root.querySelector('[data-testid="share-box"]');
    const url = root.querySelector('[data-testid="share-url"]');
    const kind = root.querySelector('[data-testid="share-kind"]');
    const note = root.querySelector('[data-testid="share-note"]');
    const runRow = root.querySelector('[data-testid="share-run-row"]');
    const runUrl = root.querySelector('[data-testid="share-run-url"]');
    const appUrl = root.querySelector('[data-testid="app-url"]');

    /** Show the popover, shifted left as far as needed to stay inside the window (its button sits at the
     *  toolbar's right end, so a box anchored at the button's left edge ran off the screen). */
    function showBox() {
      box.hidden = false;
      box.style.left = "0px";
      const rect = box.getBoundingClientRect();
      const overflow = rect.right - (document.documentElement.clientWidth - 8);
      if (overflow > 0) box.style.left = -Math.min(overflow, Math.max(0, rect.left - 8)) + "px";
    }

    /** Make the links for the editor's workflow; `which` ("share" or "app") is the one copied. */
    async function makeLinks(which) {
      if (!window.MetagenUI) return;
      const state = window.MetagenUI.state();
      if (state.yamlError) {
        showBox();
        url.value = "";
        kind.textContent = "";
        note.textContent = "Fix the YAML error first; a link cannot carry a workflow that does not load.";
        runRow.hidden = true;
        return;
      }
      const yaml = document.querySelector('[data-testid="yaml-editor"]');
      const result = await server.sl_make_links({
        base: window.location.origin + window.location.pathname,
        name: state.name, dirty: state.dirty, yaml: yaml ? yaml.value : "", run_id: state.currentRun || "",
        children: state.linked || {},
      });
      showBox();
      if (!result || result.error) {
        url.value = "";
        kind.textContent = "";
        note.textContent = "No link: " + (result ? result.error : "the app did not answer");
        runRow.hidden = true;
        return;
      }
      url.value = result.url;
      appUrl.value = result.app_url || "";
      kind.textContent = result.kind === "workflow" ? "Saved workflow" : "Workflow in the link";
      runRow.hidden = !result.run_url;
      runUrl.value = result.run_url || "";
      const app = which === "app" && result.app_url;
      const copied = await copyText(app ? result.app_url : result.url, app ? appUrl : url);
      note.textContent = (app ? "The app link opens a page with the workflow's inputs, Run and the answer, " +
        "without the editor." : result.note) + (copied ? " Copied to the clipboard." : " Select the link and copy it.");
    }

    root.addEventListener("click", async (e) => {
      const target = e.target.closest('[data-testid="share-link-btn"], [data-testid="app-link-btn"], [data-share]');
      if (!target) return;
      e.preventDefault();
      if (target.dataset.share === "close") {
        box.hidden = true;
      } else if (target.dataset.share === "copy") {
        note.textContent = (await copyText(url.value, url)) ? "Copied to the clipboard." : "Select the link and copy it.";
      } else if (target.dataset.share === "copy-run") {
        note.textContent = (await copyText(runUrl.value, runUrl)) ? "Run link copied." : "Select the link and copy it.";
      } else if (target.dataset.share === "copy-app") {
        note.textContent = (await copyText(appUrl.value, appUrl)) ? "App link copied." : "Select the link and copy it.";
      } else {
        await makeLinks(target.dataset.testid === "app-link-btn" ? "app" : "share");
      }
    });
  }

  async function start(element, server) {
    await whenEditorReady();
    bindShareButton(element, server);
    await openDeepLink(server);
  }

  window.MetagenShare = { start: start };
})();
