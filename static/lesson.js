// Lesson page behaviour: render math with the vendored KaTeX, link code-trace steps to lines, and keep the
// current part's chip in view in the pacing strip.
// Runs on first load and on every htmx swap (htmx 4 fires htmx:after:process on each piece of new content).
(function () {
  function renderMath(root) {
    if (!window.katex) return;
    root.querySelectorAll(".math-inline, .math-display").forEach(function (el) {
      if (el.dataset.rendered) return;
      try {
        window.katex.render(el.textContent, el, { displayMode: el.classList.contains("math-display"), throwOnError: false });
        el.dataset.rendered = "1";
      } catch (e) { /* leave the TeX source visible */ }
    });
  }
  function wireTraces(root) {
    root.querySelectorAll("[data-trace]").forEach(function (fig) {
      if (fig.dataset.wired) return;
      fig.dataset.wired = "1";
      fig.addEventListener("click", function (ev) {
        var btn = ev.target.closest(".trace-step");
        if (!btn) return;
        var pressed = btn.getAttribute("aria-pressed") === "true";
        fig.querySelectorAll(".trace-step").forEach(function (b) { b.setAttribute("aria-pressed", "false"); });
        fig.querySelectorAll(".line.hl").forEach(function (l) { l.classList.remove("hl"); });
        if (pressed) return;
        btn.setAttribute("aria-pressed", "true");
        btn.dataset.lines.split(",").forEach(function (n) {
          var line = fig.querySelector('.line[data-line="' + n + '"]');
          if (line) line.classList.add("hl");
        });
      });
    });
  }
  // On a narrow screen the pacing lists are rows of chips that scroll sideways: bring the current part's chip
  // into view (the list scrolls, the page does not), or a learner on part 6 sees only parts 1 and 2.
  function showCurrentChip() {
    document.querySelectorAll(".pacing ol, .pacing ul").forEach(function (list) {
      var cur = list.querySelector("li.current");
      if (!cur || list.scrollWidth <= list.clientWidth) return;
      list.scrollLeft += cur.getBoundingClientRect().left - list.getBoundingClientRect().left - 16;
    });
  }
  // Tabbing along a strip brings the focused chip fully into view (Chromium leaves a half-shown one as it is).
  document.addEventListener("focusin", function (ev) {
    var chip = ev.target.closest && ev.target.closest(".pacing li");
    if (chip) chip.scrollIntoView({ block: "nearest", inline: "nearest" });
  });
  // A part opened from the pacing list or the previous/next links replaces #lesson-body, link and all, so the focus
  // fell back to the page: a keyboard learner started again from the top and a screen reader said nothing. The
  // new part's heading takes the focus instead (read out; Tab goes on into the part, Shift+Tab back to the list).
  // htmx fires after:swap on #lesson-body itself when the link that asked is gone.
  document.addEventListener("htmx:after:swap", function (ev) {
    var body = document.getElementById("lesson-body");
    if (!body || ev.target !== body) return;
    var heading = body.querySelector(".part-wrap h2");
    if (!heading) return;
    heading.tabIndex = -1;
    heading.focus({ preventScroll: true });  // the link's show:top has scrolled to the part already
  });
  function init(root) { renderMath(root); wireTraces(root); showCurrentChip(); }
  document.addEventListener("htmx:after:process", function (ev) { init(ev.target); });
  document.addEventListener("DOMContentLoaded", function () { init(document); });
})();
