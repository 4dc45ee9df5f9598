// The instructor's editor page: CodeMirror (static/vendor/codemirror, see VERSIONS.md) over the YAML
// textarea, and the lines the validator names marked in it after every preview. Without JavaScript, or
// if the bundle fails to load, the textarea stays and works as before.
(function () {
  var editor = null;
  function markErrors() {
    var preview = document.getElementById("preview");
    if (!editor || !preview) return;
    var lines = (preview.dataset.errorLines || "").split(",").filter(Boolean).map(Number);
    editor.markErrorLines(lines);
  }
  document.addEventListener("DOMContentLoaded", function () {
    var textarea = document.querySelector("textarea[data-yaml-editor]");
    if (!textarea || !window.CourseEditor) return;
    var label = document.querySelector('label[for="' + textarea.id + '"]');
    // The page's CSP admits <style> elements only with this response's nonce; CodeMirror sets it on its own.
    editor = window.CourseEditor.mount(textarea, {
      label: label ? label.textContent : "YAML",
      nonce: textarea.dataset.cspNonce || "",
    });
    document.body.classList.add("has-code-editor");
    markErrors();
  });
  document.addEventListener("htmx:after:swap", markErrors);
})();
