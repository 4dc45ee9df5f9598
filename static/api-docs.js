// Start the vendored Swagger UI on /api/v1/docs (no inline script, so the page's CSP holds).
// validatorUrl null: Swagger UI would otherwise send the schema to an online validator for its badge.
// Dark mode: Swagger UI 5.35 themes itself dark under <html class="dark-mode"> (its standalone preset's toggle
// sets that class; this page uses the apis preset, so it follows the reader's system setting like the course).
(function () {
  var dark = window.matchMedia("(prefers-color-scheme: dark)");
  function follow() { document.documentElement.classList.toggle("dark-mode", dark.matches); }
  follow();
  dark.addEventListener("change", follow);
  var root = document.getElementById("swagger-ui");
  window.ui = window.SwaggerUIBundle({
    url: root.dataset.openapi,
    dom_id: "#swagger-ui",
    presets: [window.SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
    deepLinking: true,
    validatorUrl: null,
  });
})();
