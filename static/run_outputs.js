/* Metagen Studio — the editor page's output views: a run's or a node's outputs as HTML (text ports as <pre>,
 * candidate sets as a table with the winner starred). Plain functions, no state; ui_bridge.js calls them. */
(function () {
  "use strict";

  function esc(value) {
    return String(value === null || value === undefined ? "" : value)
      .replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  }

  function renderOutputs(box, views, title) {
    if (!views.length) { box.innerHTML = ""; return; }
    box.innerHTML = "<h4>" + esc(title) + "</h4>" + views.map((v) => {
      if (v.type === "candidates") {
        return '<div class="mg-output" data-port="' + esc(v.port) + '"><div class="mg-port">' + esc(v.port) +
          " <em>candidates</em></div>" + candidateTable(v.rows) + "</div>";
      }
      return '<div class="mg-output" data-port="' + esc(v.port) + '"><div class="mg-port">' + esc(v.port) +
        '</div><pre class="mg-value" data-testid="output-' + esc(v.port) + '">' + esc(v.text) + "</pre></div>";
    }).join("");
  }

  function candidateTable(rows) {
    return '<table class="mg-cands" data-testid="candidates-table"><thead><tr><th>#</th><th>text</th>' +
      "<th>answer</th><th>score</th><th>cluster</th><th>winner</th></tr></thead><tbody>" +
      rows.map((r) => '<tr class="' + (r.winner ? "mg-winner" : "") + '"><td>' + esc(r.index) +
        '</td><td class="mg-cand-text">' + esc(r.text) + "</td><td>" + esc(r.answer) + "</td><td>" +
        esc(r.score) + "</td><td>" + esc(r.cluster) + "</td><td>" + (r.winner ? "★" : "") + "</td></tr>").join("") +
      "</tbody></table>";
  }

  window.MetagenRunOutputs = { esc, renderOutputs, candidateTable };
})();
