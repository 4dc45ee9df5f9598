"""What the browser tests of first minutes share: the widths walked, the seeded users, and page measurements."""

from __future__ import annotations

import re

from tests.app import labruns

WIDTHS = [(1280, 900, "laptop"), (390, 844, "phone390"), (360, 740, "phone360")]
LESSON = "transformer-scaling"
LEARNER, STAFF = "polly@example.org", "stella@example.org"
CURRENT = {**labruns.TINY["fp8-step"], "recipe": "current"}
# The run the report's numerics item asks for: delayed scaling (the default) with a spike, so values clip
SPIKED = {**labruns.TINY["fp8-step"], "outlier_step": 2}

# Overflowing boxes must scroll by keyboard and say what they hold (axe: scrollable-region-focusable).
SCROLL_BOXES = """() => [...document.querySelectorAll('main *')]
  .filter(e => e.scrollWidth > e.clientWidth + 1 && ['auto', 'scroll'].includes(getComputedStyle(e).overflowX))
  .filter(e => !e.closest('.cm-editor') && e.tagName !== 'PRE' && !e.matches('.pacing ol, .pacing ul'))
  .filter(e => !(e.tabIndex >= 0 && (e.getAttribute('aria-label') || e.getAttribute('aria-labelledby'))))
  .map(e => e.className || e.tagName)"""


def context_at(browser, width, height, **kw):
    ctx = browser.new_context(viewport={"width": width, "height": height}, **kw)
    ctx.set_default_timeout(15_000)
    return ctx


# a visible caption narrower than its table (a phone's display:block table once left "Run / #4 / (A) / and ..."
# one word per line)
SQUEEZED_CAPTIONS = """[...document.querySelectorAll('caption')]
  .filter(c => !c.classList.contains('sr-only') && c.getClientRects().length)
  .filter(c => c.getBoundingClientRect().width < 0.6 * c.closest('table').getBoundingClientRect().width)
  .map(c => c.textContent.trim().slice(0, 40))"""


def overflow(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")


def rgb(css: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", css)[:3])
