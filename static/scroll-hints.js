// Hints under boxes that scroll sideways (a result table, a phone's row of lesson parts): each element marked
// data-scroll-hint says what is past the edge of the box just before it, and shows only while that box is wider
// than its screen space, so a cut value or a cut chip always comes with its cue. Checked when the page loads,
// when the window resizes, when a folded table opens, and when htmx brings content in.
(function () {
  "use strict";
  if (window.scrollHints) return;  // loaded once per page, however many fragments name it
  function check() {
    document.querySelectorAll("[data-scroll-hint]").forEach(function (hint) {
      var box = hint.previousElementSibling;
      if (!box) return;
      hint.hidden = !(box.clientWidth > 0 && box.scrollWidth > box.clientWidth + 1);
    });
  }
  var queued = false;
  function soon() {
    if (queued) return;
    queued = true;
    requestAnimationFrame(function () { queued = false; check(); });
  }
  window.scrollHints = { check: check };
  window.addEventListener("resize", soon);
  document.addEventListener("toggle", soon, true);  // <details> toggle events do not bubble: capture them
  new MutationObserver(soon).observe(document.documentElement, { childList: true, subtree: true });
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", check);
  else check();
})();
