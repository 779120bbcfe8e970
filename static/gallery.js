/* Metagen Studio — the strategy gallery on the editor page: the example workflows as cards (title, the gist of
 * their description, when to use them, their cost, the figure measured on a bundled dataset, a picture of their
 * graph), shown on the first screen and by "New from example…". The cards come from mg_gallery
 * (app/service/gallery.py); "Which one should I use?" opens the Tune tab.
 *
 * Public: window.MetagenGallery.create({root, call, openExample, openTune}) -> {show, hide, visible}
 */
(function () {
  "use strict";

  const { esc } = window.MetagenRunOutputs;  // static/run_outputs.js

  const pct = (x) => Math.round(Number(x) * 100) + "%";

  function costLine(cost) {
    if (!cost || !cost.calls) return "";
    const more = cost.lower_bound ? "+" : "";
    return cost.calls + more + " model call" + (cost.calls === 1 && !more ? "" : "s") + " · up to " +
      Number(cost.max_tokens).toLocaleString("en") + more + " tokens per item";
  }

  function measuredLine(m) {
    if (!m) return "";
    const ci = Array.isArray(m.ci) && m.ci.length === 2 ? " (" + pct(m.ci[0]) + "–" + pct(m.ci[1]) + ")" : "";
    const tokens = m.tokens_per_item !== undefined && m.tokens_per_item !== null
      ? " · " + Math.round(m.tokens_per_item) + " tokens/item" : "";
    const calls = m.calls_per_item ? " · " + (Math.round(m.calls_per_item * 10) / 10) + " calls/item" : "";
    return '<div class="mg-card-measured" data-testid="card-measured" title="measured ' + esc(m.date || "") +
      " by " + esc(m.source || "the benchmarks") + '">Measured: <b>' + pct(m.accuracy) + "</b>" + esc(ci) + " on " +
      esc(m.dataset) + " (" + esc(m.items) + " items, metric " + esc(m.metric) + ")" + esc(tokens + calls) +
      ' · <span class="mg-card-model">' + esc(m.model) + "</span></div>";
  }

  function cardHtml(c) {
    const tags = Object.entries(c.tags || {}).map(([key, values]) => values.map((v) =>
      '<span class="mg-tag mg-tag-' + esc(key) + '" title="' + esc((c.tag_notes || {})[key + ": " + v] || "") +
      '">' + esc(key) + ": " + esc(v) + "</span>").join("")).join("");
    return '<div class="mg-card" role="button" tabindex="0" data-testid="gallery-card" data-example="' +
      esc(c.name) + '" title="' + esc(c.description) + '">' +
      '<div class="mg-card-graph" aria-hidden="true">' + c.svg + "</div>" +  // SVG drawn by app/viz (escaped there)
      '<div class="mg-card-title">' + esc(c.title) + ' <span class="mg-card-file">' + esc(c.name) + "</span></div>" +
      '<div class="mg-card-gist">' + esc(c.gist) + "</div>" +
      '<div class="mg-card-tags">' + tags + "</div>" +
      '<div class="mg-card-cost" data-testid="card-cost">' + esc(costLine(c.cost)) + "</div>" +
      measuredLine(c.measured) + "</div>";
  }

  const WHICH_CARD = '<div class="mg-card mg-card-which" role="button" tabindex="0" data-testid="gallery-which">' +
    '<div class="mg-card-title">Which one should I use?</div>' +
    '<div class="mg-card-gist">It depends on your task, your model and your budget. The Tune tab races the ' +
    "strategies on your own data, keeps the test items apart for an honest figure, and hands the best one back " +
    "as a workflow.</div><div class=\"mg-card-cost\">Open the Tune tab →</div></div>";

  function create({ root, call, openExample, openTune }) {
    const box = root.querySelector("[data-testid=gallery]");
    const list = box.querySelector("[data-testid=gallery-cards]");
    let loaded = false;

    async function load() {
      list.innerHTML = '<div class="mg-gallery-wait">Loading the examples…</div>';
      const result = await call("mg_gallery", {});
      if (result.error) {
        list.innerHTML = '<div class="mg-gallery-wait mg-bad"></div>';
        list.firstChild.textContent = "The gallery could not load: " + result.error;
        return;
      }
      list.innerHTML = WHICH_CARD + (result.cards || []).map(cardHtml).join("");
      loaded = true;
    }

    function choose(card) {
      if (card.dataset.testid === "gallery-which") return openTune();
      if (card.dataset.example) openExample(card.dataset.example);
    }

    list.addEventListener("click", (e) => {
      const card = e.target.closest(".mg-card");
      if (card && list.contains(card)) choose(card);
    });
    list.addEventListener("keydown", (e) => {
      const card = e.target.closest(".mg-card");
      if (card && (e.key === "Enter" || e.key === " ")) { e.preventDefault(); choose(card); }
    });

    return {
      show: async () => {
        box.hidden = false;
        box.scrollTop = 0;
        if (!loaded) await load();
      },
      hide: () => { box.hidden = true; },
      visible: () => !box.hidden,
    };
  }

  window.MetagenGallery = { create: create };
})();
