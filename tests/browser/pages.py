"""What the browser page sweeps share: the widths walked, the seeded users, and page measurements (fit, contrast,
glaring boxes)."""

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


# WCAG contrast of every visible element's own text against its effective background: the first opaque
# background up the tree, with translucent ones blended over it. Large text (24 px, or 18.66 px bold) needs 3:1,
# the rest 4.5:1; a text field's border needs 3:1 against what is around it. SVG text is the paper islands'.
CONTRAST = """() => {
  const parse = s => { const m = s.match(/rgba?\\(([^)]+)\\)/); if (!m) return null;
    const p = m[1].split(/[ ,\\/]+/).filter(Boolean).map(Number); return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
  const blend = (top, under) => [0, 1, 2].map(i => top[i] * top[3] + under[i] * (1 - top[3])).concat([1]);
  const lum = c => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
  const ratio = (a, b) => { const x = lum(a), y = lum(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); };
  const bgOf = el => { const layers = [];
    for (let e = el; e; e = e.parentElement) { const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c[3] > 0) { layers.push(c); if (c[3] >= 1) break; } }
    let base = [255, 255, 255, 1]; for (let i = layers.length - 1; i >= 0; i--) base = blend(layers[i], base); return base; };
  const name = e => e.tagName.toLowerCase() + (typeof e.className === 'string' && e.className.trim() ? '.' + e.className.trim().split(/\\s+/).join('.') : '');
  const shown = e => e.getClientRects().length && getComputedStyle(e).visibility === 'visible'
    && parseFloat(getComputedStyle(e).opacity) > 0 && !e.closest('.sr-only, svg');
  const low = [];
  for (const e of document.querySelectorAll('body *')) {
    if (!shown(e)) continue;
    const cs = getComputedStyle(e), bg = bgOf(e);
    const text = [...e.childNodes].filter(n => n.nodeType === 3).map(n => n.textContent.trim()).join(' ').trim();
    if (text) {
      const size = parseFloat(cs.fontSize), need = size >= 24 || (size >= 18.66 && parseInt(cs.fontWeight) >= 700) ? 3 : 4.5;
      const r = ratio(blend(parse(cs.color), bg), bg);
      if (r < need) low.push(`${name(e)} "${text.slice(0, 30)}": ${r.toFixed(2)} < ${need} (${cs.color} on rgb(${bg.slice(0, 3).map(Math.round)}))`);
    }
    if (e.matches('input:not([type=checkbox]):not([type=radio]):not([type=hidden]), select, textarea')) {
      const around = bgOf(e.parentElement), r = ratio(blend(parse(cs.borderTopColor), around), around);
      if (r < 3) low.push(`${name(e)} border: ${r.toFixed(2)} < 3`);
    }
  }
  return low;
}"""

# Boxes with a light background (relative luminance over 0.35) on a dark page. Allowed: buttons (light blue with
# dark ink), the memory bar legend's and the timeline viewer's colour keys, and the paper islands that must stay
# light.
LIGHT_BOXES = """() => {
  const lum = s => { const p = s.match(/[\\d.]+/g).map(Number); if (p.length > 3 && p[3] < 0.5) return 0;
    const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(p[0]) + 0.7152 * f(p[1]) + 0.0722 * f(p[2]); };
  const islands = '.figure-scroll, figure.plot .scroll-box, figure.plot img, .plotv-chart, svg.numberline, button, .button, .membar-legend .key, .tlv-key';
  return [...document.querySelectorAll('body *')]
    .filter(e => e.getClientRects().length && !e.matches(islands) && lum(getComputedStyle(e).backgroundColor) > 0.35)
    .map(e => e.tagName.toLowerCase() + '.' + (typeof e.className === 'string' ? e.className : '') + ' ' + getComputedStyle(e).backgroundColor);
}"""

LUM = """c => { const p = c.match(/[\\d.]+/g).map(Number);
  const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
  return 0.2126 * f(p[0]) + 0.7152 * f(p[1]) + 0.0722 * f(p[2]); }"""
