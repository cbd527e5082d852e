// Draws every chart of a page from the JSON figure beside it, links Pareto points to their
// submissions, and keeps a running submission's page current (polling its tasks.json).
"use strict";
(function () {
  const dark = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
  function draw() {
    document.querySelectorAll("[data-figure]").forEach(function (node) {
      const source = document.getElementById(node.dataset.figure);
      if (!source || !window.Plotly) { return; }
      const figure = JSON.parse(source.textContent);
      const layout = Object.assign({}, figure.layout || {});
      if (dark) { layout.font = { color: "#e6e9ee" }; layout.template = undefined; }
      window.Plotly.newPlot(node, figure.data, layout, { responsive: true, displaylogo: false, displayModeBar: "hover" });
      node.on("plotly_click", function (event) {
        const point = event.points && event.points[0];
        if (point && point.customdata !== undefined) { window.location.href = "/submissions/" + point.customdata; }
      });
      node.dataset.drawn = String(figure.data.length);
    });
  }
  function follow() {
    const live = document.querySelector("[data-live]");
    if (!live) { return; }
    const seen = Number(live.dataset.done);
    window.setInterval(function () {
      fetch("/submissions/" + live.dataset.live + "/tasks.json", { cache: "no-store" })
        .then(function (response) { return response.ok ? response.json() : null; })
        .then(function (body) {
          if (!body) { return; }
          const done = body.tasks.filter(function (t) { return t.status === "committed"; }).length;
          const text = document.getElementById("progress-text");
          document.getElementById("progress").value = done;
          if (text) { text.textContent = done + " of " + body.tasks.length + " tasks committed"; }
          if (done !== seen) { window.location.reload(); }
        })
        .catch(function () { /* a missed poll is retried at the next tick */ });
    }, 5000);
  }
  document.addEventListener("DOMContentLoaded", function () { draw(); follow(); });
})();
