"""Security headers on every response: the Content-Security-Policy of HTML pages, HSTS behind HTTPS, and
Cache-Control: no-store on everything but the public static files."""

from __future__ import annotations

import secrets

# What the pages need, and nothing more: scripts, styles, fonts and images from this origin only (htmx, KaTeX,
# the docs UI and our own scripts are vendored under /static). KaTeX and Swagger UI size their boxes through
# the CSSOM, which a CSP does not govern; style *attributes* in markup stay allowed for server-drawn figures
# that set their width inline. A <style> element or an inline script is refused: htmx's own indicator
# <style> is switched off in base.html's htmx-config, and htmx never needs 'unsafe-eval': static/htmx-noeval.js
# (htmx 4's stand-in for htmx 2's allowEval=false) makes it refuse to build code from attributes. No site may frame
# a page.
CSP_NONCE_KEY = "csp_nonce"  # request.state.csp_nonce: the nonce of this response's CSP (templates pass it on)


def csp(nonce: str) -> str:
    """The policy of one HTML response. The nonce admits the <style> elements our own scripts insert with it:
    CodeMirror (the instructor's editor) styles itself through <style> tags and sets their nonce from its
    `EditorView.cspNonce` facet (@codemirror/view 6, style-mod 4.1: a document root gets a <style> element,
    only a shadow root gets constructed sheets). No inline script is admitted, nonce or not."""
    return "; ".join(
        (
            "default-src 'self'",
            "script-src 'self'",
            f"style-src 'self' 'nonce-{nonce}'",
            "style-src-attr 'unsafe-inline'",
            "img-src 'self' data:",
            "font-src 'self'",
            "connect-src 'self'",
            "object-src 'none'",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        )
    )


HSTS_S = 180 * 24 * 3600  # sent only with secure cookies, i.e. behind HTTPS
# Everything outside /static/ is drawn for one session: a learner's answers and jobs, a grader's queue, and even the
# login form, whose CSRF token belongs to the session that fetched it. no-store keeps all of it out of shared caches
# and out of the browser's disk cache, so the next person at a shared computer cannot page Back into it after a
# log-out. The vendored scripts, styles and fonts under /static/ are the same for everyone and keep their
# validators (ETag, Last-Modified), so a page load stays cheap.
PUBLIC_PREFIX = "/static/"


class SecurityHeaders:
    """Pure ASGI middleware (no per-request task or body copy) adding security headers to every response.

    Every response: X-Content-Type-Options nosniff, Referrer-Policy same-origin (links to other sites carry no
    path: a reset link or a report id never leaks in a Referer), and HSTS when cookies are HTTPS-only.
    Every response outside PUBLIC_PREFIX: Cache-Control no-store, unless the response sets its own.
    HTML responses also: the CSP above, X-Frame-Options DENY (for browsers without frame-ancestors), and
    Cross-Origin-Opener-Policy same-origin-allow-popups (no other site can script a page it opens, while a tab
    our page opens keeps its link back: the Perfetto UI hand-off posts the trace to it). A response that sets
    its own CSP (artifact downloads: sandboxed) keeps it.
    """

    def __init__(self, app, *, hsts: bool = False):
        self.app = app
        common = [(b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"same-origin")]
        if hsts:
            common.append((b"strict-transport-security", f"max-age={HSTS_S}".encode()))
        self.common = common
        self.html = [
            (b"x-frame-options", b"DENY"),
            (b"cross-origin-opener-policy", b"same-origin-allow-popups"),
        ]

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        nonce = secrets.token_urlsafe(16)
        public = scope.get("path", "").startswith(PUBLIC_PREFIX)
        scope.setdefault("state", {})[CSP_NONCE_KEY] = nonce

        async def send_with_headers(message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                names = {name.lower(): value for name, value in headers}
                extra = [h for h in self.common if h[0] not in names]
                if not public and b"cache-control" not in names:
                    extra.append((b"cache-control", b"no-store"))
                if names.get(b"content-type", b"").startswith(b"text/html"):
                    extra += [h for h in self.html if h[0] not in names]
                    if b"content-security-policy" not in names:
                        extra.append((b"content-security-policy", csp(nonce).encode()))
                message["headers"] = headers + extra
            await send(message)

        await self.app(scope, receive, send_with_headers)
