// Live refresh of a dashboard region: polls its data-live-url every few seconds
// (?v=<version>; the server answers 204 when nothing changed) and swaps the HTML.
// Stops once the server says the campaign(s) are no longer running.
(function () {
  "use strict";
  var root = document.querySelector("[data-live-url]");
  if (!root || !window.fetch) return;
  var interval = parseInt(root.getAttribute("data-live-interval"), 10) || 3000;
  var failures = 0;
  var timer = null;

  function indicator(text) {
    var el = root.querySelector("[data-live-indicator]");
    if (el) el.textContent = text;
  }

  function schedule() {
    if (root.getAttribute("data-running") !== "1") { indicator("final"); return; }
    clearTimeout(timer);
    timer = setTimeout(tick, interval * Math.min(10, 1 + failures));
  }

  function tick() {
    if (document.hidden) { schedule(); return; }
    var url = root.getAttribute("data-live-url");
    url += (url.indexOf("?") >= 0 ? "&" : "?") + "v=" + encodeURIComponent(root.getAttribute("data-version") || "");
    fetch(url, { headers: { "X-Llmduel": "1" }, credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (r.status === 204) return null;
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.text().then(function (html) {
          root.innerHTML = html;
          root.setAttribute("data-version", r.headers.get("X-Llmduel-Version") || "");
          root.setAttribute("data-running", r.headers.get("X-Llmduel-Running") === "1" ? "1" : "0");
          root.setAttribute("data-refreshed", String(Date.now()));
        });
      })
      .then(function () { failures = 0; schedule(); })
      .catch(function () {
        failures += 1;
        indicator("connection lost; retrying");
        schedule();
      });
  }

  document.addEventListener("visibilitychange", function () { if (!document.hidden) tick(); });
  schedule();
})();
