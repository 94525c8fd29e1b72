// The annotator's form: votes and "next duel" go to the server as form posts
// (header X-Llmduel: 1 -> JSON with the new panel's HTML, rendered and sanitised
// on the server). Keyboard: 1/a, 2/b, 3/t, 4/x. Without JavaScript the same forms
// post normally and the server redirects back to the page.
(function () {
  "use strict";
  var app = document.getElementById("annotate");
  if (!app || !window.fetch) return;
  var base = app.getAttribute("data-base");
  var busy = false;
  var retryTimer = null;
  var KEYS = { "1": "a", "a": "a", "2": "b", "b": "b", "3": "tie", "t": "tie", "4": "both_bad", "x": "both_bad" };
  // Keyboard: 1/a, 2/b, 3/t, 4/x vote; s skips.

  function panel() { return document.getElementById("panel"); }

  function setBusy(on) {
    busy = on;
    var p = panel();
    if (!p) return;
    p.classList.toggle("busy", on);
    p.querySelectorAll("button").forEach(function (b) { b.disabled = on; });
  }

  function showError(text) {
    var p = panel();
    if (!p) return;
    var el = p.querySelector(".notice.error.client");
    if (!el) {
      el = document.createElement("p");
      el.className = "notice error client";
      p.insertBefore(el, p.firstChild);
    }
    el.textContent = text;
  }

  function post(path, body) {
    if (busy) return;
    clearTimeout(retryTimer);
    setBusy(true);
    fetch(base + path, {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded", "X-Llmduel": "1" },
      body: new URLSearchParams(body || {}).toString(),
      credentials: "omit",
      cache: "no-store"
    }).then(function (r) {
      return r.json().catch(function () { return null; }).then(function (data) {
        if (!r.ok || !data || typeof data.html !== "string") {
          if (r.status === 429 && data && typeof data.message === "string") throw new Error(data.message);
          throw new Error((r.status === 403 || r.status === 401) ? "This annotator link is no longer valid." : "The server answered " + r.status + ".");
        }
        return data;
      });
    }).then(function (data) {
      busy = false;
      var p = panel();
      p.outerHTML = data.html;
      settle(true);
    }).catch(function (err) {
      setBusy(false);
      showError((err && err.message ? err.message : "Network error.") + " Your vote may not have been saved; please try again.");
      if (panel().getAttribute("data-state") !== "duel") retryTimer = setTimeout(function () { post("/next"); }, 5000);
    });
  }

  function settle(fresh) {
    var p = panel();
    if (!p) return;
    var state = p.getAttribute("data-state");
    app.setAttribute("data-state", state);
    if (state === "loading") post("/next");
    else if (state === "wait") retryTimer = setTimeout(function () { post("/next"); }, 3000);
    if (fresh && state === "duel") {
      window.scrollTo(0, 0);
      var h = p.querySelector(".prompt h2");
      if (h) { h.setAttribute("tabindex", "-1"); h.focus({ preventScroll: true }); }
    }
  }

  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (!form.hasAttribute("data-ajax")) return;
    e.preventDefault();
    if (busy) return;
    var data = new FormData(form);
    if (e.submitter && e.submitter.name) data.set(e.submitter.name, e.submitter.value);
    var pairs = [];
    data.forEach(function (v, k) { pairs.push([k, v]); });
    post(form.getAttribute("data-ajax"), pairs);
  });

  document.addEventListener("keydown", function (e) {
    if (e.ctrlKey || e.metaKey || e.altKey || e.repeat) return;
    if (e.target && e.target.closest && e.target.closest("input, textarea, select, [contenteditable]")) return;
    var key = (e.key || "").toLowerCase();
    if (key === "s" && !busy) {
      var skip = document.querySelector("#panel #skip");
      if (skip && !skip.disabled) { e.preventDefault(); skip.click(); }
      return;
    }
    var choice = KEYS[key];
    if (!choice || busy) return;
    var btn = document.querySelector('#panel button[name="choice"][value="' + choice + '"]');
    if (!btn || btn.disabled) return;
    e.preventDefault();
    btn.classList.add("pressed");
    btn.click();
  });

  settle(false);
})();
