/* Loader of the Metagen Studio node-graph editor, whose code is the ES modules of static/editor/ (entry:
 * static/editor/index.js; its header documents the API). Load static/editor.css and this file, then:
 *
 *   const MetagenEditor = await window.MetagenEditorReady;  // rejected if the modules could not be loaded
 *   const ed = MetagenEditor.mount(element, { schema, rules, ... });
 *
 * or wait for the "metagen-editor-ready" event on window (detail: MetagenEditor), fired once
 * window.MetagenEditor is set.
 *
 * A classic script on purpose: Gradio's gr.HTML `head` re-creates each <script src> with only its src and async,
 * so a type="module" tag there would run as a classic script and fail on `import`. This loader imports the entry
 * with dynamic import() (allowed in classic scripts) and gives it its own query, e.g. ?v=<version>; each module
 * imports the others with the query of its own URL (`new URL(import.meta.url).search`), so every module of
 * static/editor/ is fetched with the version and a new version reaches them all (app/ui/assets.py versions
 * this file with the newest mtime of it and of static/editor/). It also works as a module script.
 */
(function () {
  "use strict";
  if (window.MetagenEditorReady) return; // loaded twice

  function ownUrl() {
    const current = document.currentScript;
    if (current && current.src) return current.src;
    // a module script has no currentScript: the last <script> whose path ends in /editor.js
    const mine = Array.from(document.scripts)
      .filter((s) => s.src && new URL(s.src, document.baseURI).pathname.endsWith("/editor.js"));
    return mine.length ? mine[mine.length - 1].src : new URL("editor.js", document.baseURI).href;
  }

  const src = new URL(ownUrl(), document.baseURI);
  const entry = new URL("editor/index.js", src);
  entry.search = src.search;
  const ready = import(entry.href).then(() => {
    if (!window.MetagenEditor) throw new Error("static/editor/index.js did not set window.MetagenEditor");
    return window.MetagenEditor;
  });
  ready.catch((err) => console.error("metagen editor: the editor modules did not load:", err));
  window.MetagenEditorReady = ready;
})();
