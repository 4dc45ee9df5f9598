"""Open a page and wait until it is whole, without Playwright's "networkidle" toll on every page.

"networkidle" waits for 500 ms with no request in flight, so a sweep of twenty server-rendered pages spends ten
seconds waiting after pages that were finished at their `load` event. `load` already covers everything the HTML
asks for (styles, scripts, images); what it does not cover is what scripts fetch afterwards (plot.js's chart
data, timeline.js's trace, htmx loads). So: a page whose scripts started a fetch or XHR on the way to `load` is
waited on until the network is idle, as before; a page that started none is whole at `load`.
"""

from __future__ import annotations

# Requests a script makes; a page that made any of these may still be drawing what they bring.
SCRIPTED = {"fetch", "xhr", "eventsource", "websocket"}


def goto_settled(page, url: str):
    """`page.goto(url)`, then wait for network idle only if the page's scripts fetched something; returns what
    `page.goto` returned (the main document's response)."""
    scripted: list[str] = []

    def seen(request) -> None:
        if request.resource_type in SCRIPTED:
            scripted.append(request.url)

    page.on("request", seen)
    try:
        response = page.goto(url)  # returns at the `load` event: the document and every resource it names
        if scripted:
            page.wait_for_load_state("networkidle")
        return response
    finally:
        page.remove_listener("request", seen)
