// The grader's review page. Keyboard grading: j/k move between rubric lines, digits pick a level of the
// current line (by its points, or its place: the page's data-key), f/n jump to feedback/notes, Ctrl+Enter saves;
// the total updates as levels change.
// Keys typed into a text box are left alone (Esc leaves the box). Leaving the page (a link, reload, closing the
// tab) with picks or text not saved yet asks first; saving does not. No dependencies.
(function () {
  "use strict";
  // A claim, release, regrade or save answers a POST with this page: put the page's own address back, so that
  // reloading it reads the report again instead of sending the post a second time (a second save read as a
  // conflict with the grader's own first one).
  const review = document.querySelector("[data-here]");
  if (review && history.replaceState) {
    const here = new URL(review.dataset.here, location.href);
    if (here.pathname !== location.pathname) history.replaceState(history.state, "", here.pathname + here.search + location.hash);
  }
  const form = document.querySelector("form[data-grading]");
  if (!form) return;
  const items = Array.from(form.querySelectorAll(".rubric-item"));
  const total = document.getElementById("grade-total");
  let current = 0;
  let visited = false;  // whether a rubric line has had the focus yet

  // What the form held when the page came: a change from it is unsaved work until the form is sent.
  const snapshot = () => JSON.stringify(Array.from(new FormData(form).entries()));
  // A save the server refused comes back with what was sent (data-unsaved): still not saved.
  const saved = form.hasAttribute("data-unsaved") ? null : snapshot();
  let sending = false;
  form.addEventListener("submit", () => { sending = true; });
  window.addEventListener("beforeunload", (e) => {
    if (sending || snapshot() === saved) return;
    e.preventDefault();
    e.returnValue = "";  // older browsers show their own "leave site?" question only when this is set
  });
  window.addEventListener("pageshow", () => { sending = false; });

  function recompute() {
    let sum = 0;
    for (const item of items) {
      const picked = item.querySelector("input[type=radio]:checked");
      if (picked) sum += parseFloat(picked.dataset.fraction) * parseFloat(item.dataset.points);
    }
    if (total) total.textContent = String(Math.round(sum * 100) / 100);
  }

  function focusItem(i) {
    if (!items.length) return;
    current = Math.max(0, Math.min(items.length - 1, i));
    items.forEach((el, j) => el.classList.toggle("current", j === current));
    const item = items[current];
    const target = item.querySelector("input[type=radio]:checked") || item.querySelector("input[type=radio]") || item;
    target.focus();
    item.scrollIntoView({ block: "nearest" });
  }

  // Every level radio is required: a save with a line unscored stops in the browser, on that line. Its message
  // names the line (the browser's own, "Please select one of these options", does not, and on a phone the
  // line's title is often scrolled away above the focused radio).
  form.addEventListener("invalid", (e) => {
    const radio = e.target;
    if (!(radio instanceof HTMLInputElement) || radio.type !== "radio" || !radio.validity.valueMissing) return;
    const item = radio.closest(".rubric-item");
    if (item) radio.setCustomValidity(`Pick a level for line ${items.indexOf(item) + 1}, “${item.dataset.title}”, before saving.`);
  }, true);
  form.addEventListener("change", (e) => {
    if (e.target instanceof HTMLInputElement && e.target.type === "radio") {
      for (const r of form.querySelectorAll(`input[name="${e.target.name}"]`)) r.setCustomValidity("");
    }
    recompute();
    // a line a refused save marked as unscored stops saying so once it has a level
    const item = e.target instanceof Element ? e.target.closest(".rubric-item.unscored") : null;
    if (item && item.querySelector("input[type=radio]:checked")) {
      item.classList.remove("unscored");
      const note = item.querySelector(".unscored-note");
      if (note) note.hidden = true;
    }
  });
  form.addEventListener("focusin", (e) => {
    const i = items.findIndex((el) => el.contains(e.target));
    if (i >= 0) {
      current = i;
      visited = true;
      items.forEach((el, j) => el.classList.toggle("current", j === current));
    }
  });

  document.addEventListener("keydown", (e) => {
    const t = e.target;
    const typing = t instanceof HTMLTextAreaElement || (t instanceof HTMLInputElement && t.type !== "radio") || t.isContentEditable;
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      // Save only: the foot of an unclaimed report holds a Claim button that belongs to the claim form
      if (form.querySelector("button[type=submit]:not([form])")) { e.preventDefault(); form.requestSubmit(); }
      return;
    }
    if (typing) {
      if (e.key === "Escape") { t.blur(); focusItem(current); }
      return;
    }
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    // Before any line has had the focus (the page just opened) j and k go to the current line: the first j lands
    // on line 1 instead of skipping it.
    if (e.key === "j") { e.preventDefault(); focusItem(visited ? current + 1 : current); }
    else if (e.key === "k") { e.preventDefault(); focusItem(visited ? current - 1 : current); }
    else if (e.key === "f" || e.key === "n") {
      const box = document.getElementById(e.key === "f" ? "feedback" : "notes");
      if (box && !box.disabled) { e.preventDefault(); box.focus(); }
    } else if (/^[0-9]$/.test(e.key) && items.length) {
      // The key each level answers to is the page's (data-key): its points where every level of the rubric is a
      // whole number of points, else its place in the line (app/services/grading/grades.py level_keys).
      const radio = items[current].querySelector('input[type=radio][data-key="' + e.key + '"]');
      if (radio && !radio.disabled) {
        e.preventDefault();
        radio.checked = true;
        radio.focus();
        radio.dispatchEvent(new Event("change", { bubbles: true }));  // as a click would: total, marks
      }
    }
  });
  recompute();
  // A refused save focuses its first unscored line (autofocus) before this deferred script runs, so no focusin
  // was seen: start from the line that has the focus, or digits would pick levels of line 1.
  const focused = items.findIndex((el) => el.contains(document.activeElement));
  current = focused >= 0 ? focused : 0;
  visited = focused >= 0;
  if (items.length) items[current].classList.add("current");
})();
