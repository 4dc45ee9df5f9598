// Every page: when something the learner did through htmx (a form, a link, a button) fails without its answer
// coming back into the page, say so instead of doing nothing, and never throw away what they typed. A form's own
// errors (400, 409, 422) come back next to its fields (the htmx-config in base.html swaps those); any other
// error status is shown here with the server's own sentence, and so is a request that got no answer at all.
// - Logged out (401, e.g. "log out everywhere" on another device): the server asks htmx to go to the login page;
//   instead the page stays, with a link that logs in again in a new tab.
// - Form token out of date (403 with a fresh X-CSRF-Token, after a login in another tab): the page takes the
//   fresh token and sends the form once more by itself (a refused token means nothing was done), no reload. Only
//   a form htmx sends on submit to its own action is sent again (the editor previews on input but its action
//   publishes: it only takes the token, for its next preview).
// Background requests (the page's job-status poll, the cluster page) stay quiet: they try again by
// themselves. Checked against htmx 4.0.1 (static/vendor/htmx): htmx:before:response can stop a response's
// handling (htmx.js #issueRequest); htmx:finally:request follows every request, ctx.swap "none" for a status the
// config does not swap.
(function () {
  var UNREACHABLE = "The course could not be reached, so nothing was sent or saved. " +
    "Check your connection and try again; what you typed is still on the page.";
  var RENEWED = "The login changed since this page was loaded, so its form token was out of date and nothing " +
    "was sent. The page has a fresh token now: the next try goes through, and what you typed is still here.";
  var LOGGED_OUT = "You are logged out (your session ended or was ended on another device), so nothing was saved. " +
    "What you typed is still here: ";

  function box() { return document.getElementById("request-error"); }

  function show(message, loginLink) {
    var b = box();
    if (!b) return;
    b.hidden = false;  // shown first, then filled: the alert is announced when its text arrives
    var p = b.querySelector("[data-message]");
    p.textContent = message;
    if (loginLink) {
      var a = document.createElement("a");
      a.href = "/login";
      a.target = "_blank";
      a.rel = "noopener";
      a.textContent = "log in again in a new tab";
      p.append(a, ", then press the button again.");
    }
  }

  function hide() {
    var b = box();
    if (b) b.hidden = true;
  }

  function byLearner(elt) {
    return !!(elt && elt.closest && elt.closest("form, a, button"));
  }

  // A form whose htmx request is its own submit to its own action: sending it again does what was asked.
  function resendable(form) {
    if (!form || form.tagName !== "FORM" || form.dataset.courseResent) return false;
    var trigger = form.getAttribute("hx-trigger");
    return form.getAttribute("hx-post") === form.getAttribute("action") && (!trigger || /\bsubmit\b/.test(trigger));
  }

  function renewToken(token) {
    var headers = {};
    try { headers = JSON.parse(document.body.getAttribute("hx-headers:inherited") || "{}"); } catch (e) { /* rebuilt below */ }
    headers["X-CSRF-Token"] = token;
    document.body.setAttribute("hx-headers:inherited", JSON.stringify(headers));
    document.querySelectorAll("input[name=csrf_token]").forEach(function (input) { input.value = token; });
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

  document.addEventListener("htmx:before:response", function (ev) {
    var ctx = ev.detail.ctx;
    var status = ctx.response.status;
    if (status === 401) {  // no redirect: the page, and what was typed on it, stays
      ev.preventDefault();
      ctx.courseShown = true;
      if (byLearner(ctx.sourceElement)) show(LOGGED_OUT, true);
      return;
    }
    var fresh = ctx.response.headers.get("x-csrf-token");
    if (status === 403 && fresh) {
      renewToken(fresh);
      ctx.courseRenewed = true;
      ctx.courseResend = resendable(ctx.sourceElement);
    }
  });

  document.addEventListener("htmx:finally:request", function (ev) {
    var ctx = ev.detail.ctx;
    var source = ctx.sourceElement;
    if (ctx.courseResend) {  // once per press: if the fresh token is refused too, the alert says so
      source.dataset.courseResent = "1";
      var submitter = ctx.request && ctx.request.submitter;  // e.g. "Run it on CPU instead" carries a value
      setTimeout(function () { source.requestSubmit(submitter && submitter.form === source ? submitter : null); }, 0);
      return;
    }
    if (source && source.dataset) delete source.dataset.courseResent;
    if (!ctx.response || ctx.courseShown || !byLearner(source)) return;
    if (ctx.response.status < 400 || ctx.swap !== "none" || (ctx.hx && ctx.hx.redirect)) return;
    if (ctx.courseRenewed) show(RENEWED);
    else show(serverMessage(ctx) || "The course answered with error " + ctx.response.status + "; nothing was changed.");
  });

  document.addEventListener("htmx:error", function (ev) {
    var ctx = ev.detail.ctx;
    if (ctx && !ctx.response && byLearner(ctx.sourceElement)) show(UNREACHABLE);
  });

  document.addEventListener("click", function (ev) {
    if (ev.target.closest && ev.target.closest("#request-error [data-dismiss]")) hide();
  });
})();
