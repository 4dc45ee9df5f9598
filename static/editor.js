// The instructor's editor page: CodeMirror (static/vendor/codemirror, see VERSIONS.md) over the YAML
// textarea, and the lines the validator names marked in it after every preview. Without JavaScript, or
// if the bundle fails to load, the textarea stays and works as before.
(function () {
  var editor = null;
  // The published text (null once publishing): leaving the page with other text asks first. A page that came back
  // from a refused publish (data-unpublished) holds unpublished text from the start.
  var saved = null;
  function markErrors() {
    var preview = document.getElementById("preview");
    if (!editor || !preview) return;
    var lines = (preview.dataset.errorLines || "").split(",").filter(Boolean).map(Number);
    editor.markErrorLines(lines);
  }
  document.addEventListener("DOMContentLoaded", function () {
    var textarea = document.querySelector("textarea[data-yaml-editor]");
    if (!textarea) return;
    saved = textarea.hasAttribute("data-unpublished") ? "\u0000unpublished" : textarea.value;
    var form = textarea.form;
    // Publishing leaves the page on purpose; following a file link or "← Instructor" with unpublished
    // edits would lose them without a word, so the browser asks first.
    if (form) form.addEventListener("submit", function () { saved = null; });
    window.addEventListener("beforeunload", function (ev) {
      if (saved !== null && textarea.value !== saved) {
        ev.preventDefault();
        ev.returnValue = "";
      }
    });
    var label = document.querySelector('label[for="' + textarea.id + '"]');
    // The label names the file the text is for; typing a new file name above renames it too.
    var path = document.getElementById("path");
    if (path && label) path.addEventListener("input", function () { label.textContent = "YAML of " + path.value; });
    if (!window.CourseEditor) return;
    // The page's CSP admits <style> elements only with this response's nonce; CodeMirror sets it on its own.
    editor = window.CourseEditor.mount(textarea, {
      label: label ? label.textContent : "YAML",
      nonce: textarea.dataset.cspNonce || "",
    });
    document.body.classList.add("has-code-editor");
    markErrors();
  });
  // The publish options each preview swaps in (templates/instructor/_publish_options.html): the part a new question
  // is listed in, removing the questions a part no longer lists, moving parts up to make room for a new one. They
  // preview again when they change; htmx puts the focus back on the swapped-in field of the same id
  // (tests/browser/test_authoring_tasks.py checks it).
  document.addEventListener("change", function (ev) {
    var form = document.getElementById("editor");
    var id = ev.target && ev.target.id;
    var option = id === "list_in" || id === "drop_unlisted" || id === "make_room";
    if (form && option) form.dispatchEvent(new Event("list-in-changed"));
  });
  document.addEventListener("htmx:after:swap", markErrors);
})();
