// Reading time: the lesson page counts the seconds its part is on screen (templates/lessons/_part_foot.html,
// [data-reading]) and reports them at most once every data-report-s seconds, and whatever is left as soon as the
// part is hidden (another tab, a locked phone), swapped for another part, or the page is left or closed.
// navigator.sendBeacon carries each report: the browser sends it even while the tab closes. A beacon cannot set
// a header, so the session's CSRF token goes in the form body (the server's check reads either), taken from
// <body>'s hx-headers at send time, where static/requests.js keeps it fresh. The server credits no more than the
// wall time since the part's last report (app/services/learning/progress.py add_time): a report can undercount,
// never add time that did not pass. Nothing is counted while the page is hidden.
(function () {
  var part = null;  // {url, every: ms, ms: counted, not yet reported, since: when this stretch on screen began}
  var timer = null;

  function token() {
    try {
      return JSON.parse(document.body.getAttribute("hx-headers:inherited") || "{}")["X-CSRF-Token"] || "";
    } catch (e) {
      return "";
    }
  }

  function counted(p, now) {
    return p.ms + (p.since === null ? 0 : now - p.since);
  }

  // Hand in what was counted, in whole seconds; the fraction stays for the next report.
  function report(p) {
    var now = performance.now();
    var total = counted(p, now);
    var seconds = Math.floor(total / 1000);
    if (seconds < 1) return;
    var body = new URLSearchParams({ seconds: String(seconds), csrf_token: token() });
    if (!navigator.sendBeacon(p.url, body)) return;  // refused (too much queued): it stays counted for the next try
    p.ms = total - seconds * 1000;
    if (p.since !== null) p.since = now;
  }

  function schedule() {
    clearTimeout(timer);
    timer = null;
    if (!part || part.since === null) return;
    var wait = Math.max(1000, part.every - counted(part, performance.now()));
    timer = setTimeout(function () {
      report(part);
      schedule();
    }, wait);
  }

  function pause() {
    if (!part) return;
    if (part.since !== null) {
      part.ms += performance.now() - part.since;
      part.since = null;
    }
    report(part);
    schedule();
  }

  function resume() {
    if (!part || part.since !== null) return;
    part.since = performance.now();
    schedule();
  }

  // The part on the page now: a new one (htmx swapped the part) first hands in the old one's time.
  function find() {
    var el = Array.prototype.find.call(document.querySelectorAll("[data-reading]"), function (e) {
      return !e.closest("[inert]");  // the instructor's preview of a part counts nothing
    });
    var url = el ? el.getAttribute("data-reading") : null;
    if (part && part.url === url) return;  // the same part, whatever htmx swapped around it
    if (part) pause();
    part = null;
    if (el) {
      var every = parseInt(el.getAttribute("data-report-s"), 10) || 60;
      part = { url: url, every: every * 1000, ms: 0, since: null };
      if (document.visibilityState === "visible") resume();
    }
  }

  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "hidden") pause();
    else resume();
  });
  window.addEventListener("pagehide", pause);  // left or closed (visibilitychange may not come first)
  window.addEventListener("pageshow", function (ev) {
    if (ev.persisted && document.visibilityState === "visible") resume();  // back from the back-forward cache
  });
  document.addEventListener("htmx:after:swap", find);
  document.addEventListener("DOMContentLoaded", find);
})();
