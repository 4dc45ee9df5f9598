// htmx runs JavaScript written in markup (hx-on:* handlers, "js:" values of hx-vals, hx-headers, hx-confirm and
// hx-action, [filters] in hx-trigger) by building functions from the text with Function and AsyncFunction.
// htmx 2 turned that off with htmx.config.allowEval = false; htmx 4.0.1 (static/vendor/htmx) has no such setting,
// but hands its extensions a hook that replaces the two constructors (initSecurity in the api an extension's init
// receives; htmx.js #executeJavaScript builds every such function with them). This extension hands htmx
// constructors that refuse, so no text in a page is ever run as code: not ours (the pages' scripts are the files
// under /static/, and no template uses those attributes) and not a stranger's that slipped past escaping. The CSP
// (script-src without 'unsafe-eval') refuses the same in the browser; this holds even where a policy is missing.
// A refused attribute leaves one error in the console that says so.
(function () {
  function refuse() {
    throw new Error("htmx eval is off (static/htmx-noeval.js): JavaScript in an hx- attribute is not run");
  }
  htmx.registerExtension("no-eval", {
    init: function (api) { api.initSecurity(null, refuse, refuse); }
  });
})();
