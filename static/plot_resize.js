/* Metagen Studio — a Plotly figure drawn while its tab was hidden (the samples view that follows the newest run,
 * an evaluation's plots) measured its width as zero and stayed at Plotly's default, about half the page, after
 * the tab was opened. Each figure is watched, and re-laid out to its container's width when that changes. */
(function () {
  "use strict";
  if (!window.ResizeObserver || !window.MutationObserver) return;
  const watched = new WeakSet();
  const widths = new WeakMap();

  const observer = new ResizeObserver((entries) => {
    for (const entry of entries) {
      const plot = entry.target;
      const width = Math.round(entry.contentRect.width);
      if (!width || widths.get(plot) === width) continue;  // hidden, or no change since the last layout
      widths.set(plot, width);
      const Plotly = window.Plotly;
      if (Plotly && Plotly.Plots && plot._fullLayout) Plotly.Plots.resize(plot);
    }
  });

  function watch() {
    for (const plot of document.querySelectorAll(".js-plotly-plot")) {
      if (watched.has(plot)) continue;
      watched.add(plot);
      observer.observe(plot);
    }
  }

  let pending = false;
  function soon() {  // the page changes often (a run's progress): look for new figures once a frame at most
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; watch(); });
  }

  function start() {
    watch();
    new MutationObserver(soon).observe(document.body, { childList: true, subtree: true });
  }

  if (document.body) start();
  else document.addEventListener("DOMContentLoaded", start);
})();
