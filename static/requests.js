// Every page: when something the learner did through htmx (a form, a link, a button) fails without its answer
// coming back into the page, say so instead of doing nothing. A form's own errors (400, 409, 422) come back next
// to its fields (the htmx-config in base.html swaps those); any other error status is shown here with the
// server's own message, and so is a request that got no answer at all. Background polls (job cards, the cluster
// page, the reading-time beat) stay quiet: they try again by themselves.
(function () {
  var UNREACHABLE = "The course could not be reached, so nothing was sent or saved. " +
    "Check your connection and try again; what you typed is still on the page.";

  function box() { return document.getElementById("request-error"); }

  function show(message) {
    var b = box();
    if (!b) return;
    b.hidden = false;  // shown first, then filled: the alert is announced when its text arrives
    b.querySelector("[data-message]").textContent = message;
  }

  function hide() {
    var b = box();
    if (b) b.hidden = true;
  }

  function byLearner(elt) {
    return !!(elt && elt.closest && elt.closest("form, a, button"));
  }

  // The server's sentence: {"detail": ...} from JSON answers, the marked paragraph of an error page.
  function serverMessage(ctx) {
    var type = (ctx.response.headers.get("content-type") || "").toLowerCase();
    var text = ctx.text || "";
    try {
      if (type.indexOf("application/json") === 0) {
        var detail = JSON.parse(text).detail;
        return typeof detail === "string" ? detail : "";
      }
      if (type.indexOf("text/html") === 0) {
        var doc = new DOMParser().parseFromString(text, "text/html");
        var p = doc.querySelector("[data-error-detail]") || doc.querySelector("p");
        return p ? p.textContent.trim() : "";
      }
    } catch (e) { /* fall through to the status line */ }
    return "";
  }

  document.addEventListener("htmx:before:request", function (ev) {
    if (byLearner(ev.target)) hide();
  });

  document.addEventListener("htmx:finally:request", function (ev) {
    var ctx = ev.detail.ctx;
    if (!ctx.response || !byLearner(ctx.sourceElement)) return;
    if (ctx.response.status < 400 || ctx.swap !== "none" || (ctx.hx && ctx.hx.redirect)) return;
    show(serverMessage(ctx) || "The course answered with error " + ctx.response.status + "; nothing was changed.");
  });

  document.addEventListener("htmx:error", function (ev) {
    var ctx = ev.detail.ctx;
    if (ctx && !ctx.response && byLearner(ctx.sourceElement)) show(UNREACHABLE);
  });

  document.addEventListener("click", function (ev) {
    if (ev.target.closest && ev.target.closest("#request-error [data-dismiss]")) hide();
  });
})();
