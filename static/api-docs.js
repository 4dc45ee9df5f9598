// Start the vendored Swagger UI on /api/v1/docs (no inline script, so the page's CSP holds).
// validatorUrl null: Swagger UI would otherwise send the schema to an online validator for its badge.
(function () {
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
