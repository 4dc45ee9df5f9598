"""Lesson figures with a phone layout, measured as Chromium draws them at 390x844 and 1280x800.

On a phone each one swaps to its narrow drawing (templates/lessons/_figure.html, static/app.css): every label at
least 11 px on screen, no two labels on top of each other, none cut off by the picture's edge or the screen's.
On a laptop the wide drawing shows and the narrow one stays hidden, also from screen readers.
"""

import pytest

from tests.browser.conftest import SHOTS, SIZES, register
from tests.browser.test_lesson_quality import serious_violations

pytestmark = pytest.mark.browser

# page -> the figures on it that have a phone layout
PAGES = {
    "/lessons/transformer-scaling/deep-dives": [
        "fp8-grid", "tp-mlp", "tp-mlp-sp", "mesh-right", "mesh-wrong", "step-14ms", "ring-bytes", "ring-alpha",
        "tp-roof",
    ],
    "/lessons/planning-at-scale/memory-anatomy": ["memory-7b", "memory-70b"],
}  # fmt: skip
MIN_TEXT_PX = 11  # the smallest label a learner should have to read on a phone

# Every <text> of the figure's visible SVG: its string, its size on screen and its box, and the SVG's box.
MEASURE = """fig => {
  const svg = [...fig.querySelectorAll('svg[role=img]')].find(s => s.getBoundingClientRect().width > 0);
  const r = svg.getBoundingClientRect(), k = r.width / svg.viewBox.baseVal.width;
  const texts = [...svg.querySelectorAll('text')].filter(t => t.textContent.trim());
  return {drawn: svg.viewBox.baseVal.width, wide: !!svg.closest('.fig-wide'), k,
          svg: {l: r.left, r: r.right, t: r.top, b: r.bottom},
          texts: texts.map(t => { const b = t.getBoundingClientRect();
            return {s: t.textContent, px: parseFloat(getComputedStyle(t).fontSize) * k,
                    l: b.left, r: b.right, t: b.top, b: b.bottom}; })};
}"""


def overlaps(texts: list[dict]) -> list[tuple[str, str]]:
    """Pairs of labels whose boxes share more than a hairline (1 px) both ways."""
    out = []
    for i, a in enumerate(texts):
        for b in texts[i + 1 :]:
            if min(a["r"], b["r"]) - max(a["l"], b["l"]) > 1 and min(a["b"], b["b"]) - max(a["t"], b["t"]) > 1:
                out.append((a["s"], b["s"]))
    return out


def problems_of(m: dict, screen_width: int) -> list[str]:
    """What is wrong with one measured figure on a phone, in words."""
    found = [f"{t['s']!r} is {t['px']:.1f} px" for t in m["texts"] if t["px"] < MIN_TEXT_PX]
    found += [f"{a!r} overlaps {b!r}" for a, b in overlaps(m["texts"])]
    box = m["svg"]
    found += [
        f"{t['s']!r} runs past the picture's edge"
        for t in m["texts"]
        if t["l"] < box["l"] - 1 or t["r"] > box["r"] + 1 or t["t"] < box["t"] - 1 or t["b"] > box["b"] + 1
    ]
    if box["l"] < 0 or box["r"] > screen_width + 1:
        found.append(f"the picture spans {box['l']:.0f}..{box['r']:.0f} px of a {screen_width} px screen")
    return found


@pytest.fixture(scope="module")
def measured(browser, live_server):
    """Each figure measured once per width, with a screenshot of it under test-artifacts/screenshots/figures/."""
    out: dict[str, dict[str, dict]] = {"axe": {}}
    for size, (w, h) in SIZES.items():
        ctx = browser.new_context(viewport={"width": w, "height": h})
        page = ctx.new_page()
        page.set_default_timeout(15_000)
        register(page, live_server.url, f"figphone-{size}@example.org")
        for path, ids in PAGES.items():
            page.goto(live_server.url + path)
            if size == "phone":  # the phone layouts are only on show here, so only here can axe read them
                out["axe"][path] = serious_violations(page)
            for fid in ids:
                fig = page.locator(f"#fig-{fid}")
                fig.scroll_into_view_if_needed()
                m = fig.evaluate(MEASURE)
                m["scrolls"] = fig.locator(".figure-scroll").evaluate("e => e.scrollWidth > e.clientWidth + 1")
                m["hint"] = fig.locator(".scroll-hint").is_visible()
                m["hidden_layout_visible"] = fig.locator(".fig-wide svg" if size == "phone" else ".fig-narrow svg")
                m["hidden_layout_visible"] = m["hidden_layout_visible"].is_visible()
                (SHOTS / "figures").mkdir(parents=True, exist_ok=True)
                fig.locator(".figure-scroll").screenshot(path=str(SHOTS / "figures" / f"{fid}-{size}.png"))
                out.setdefault(size, {})[fid] = m
        ctx.close()
    return out


@pytest.mark.parametrize("fid", [f for ids in PAGES.values() for f in ids])
def test_on_a_phone_the_figure_is_its_narrow_drawing_legible_and_whole(measured, fid):
    m = measured["phone"][fid]
    assert not m["wide"] and m["drawn"] == 340, m["drawn"]
    assert not m["hidden_layout_visible"], "the wide drawing is hidden (display: none, so not read out twice)"
    assert not m["scrolls"] and not m["hint"]
    assert m["k"] >= 0.95, f"drawn at {m['k']:.2f}× its size"  # about its own size: nothing shrunk
    assert problems_of(m, SIZES["phone"][0]) == []


@pytest.mark.parametrize("fid", [f for ids in PAGES.values() for f in ids])
def test_on_a_laptop_the_figure_is_its_wide_drawing(measured, fid):
    m = measured["laptop"][fid]
    assert m["wide"] and m["drawn"] > 400 and not m["hidden_layout_visible"]
    assert not m["scrolls"] and not m["hint"]  # whole in its box: a 600 px ring chart too
    assert m["k"] >= 0.95, f"drawn at {m['k']:.2f}× its size"


def test_the_phone_layouts_pass_axe(measured):
    assert measured["axe"] == dict.fromkeys(PAGES, [])


def test_the_measure_catches_small_overlapping_and_cut_labels():
    """The checks above can fail: labels drawn too small, on top of each other, or past the edge are reported."""
    svg = {"l": 0, "r": 340, "t": 0, "b": 200}
    ok = {"s": "a", "px": 12, "l": 10, "r": 40, "t": 10, "b": 24}
    assert problems_of({"svg": svg, "texts": [ok, {**ok, "s": "b", "t": 26, "b": 40}]}, 390) == []
    assert problems_of({"svg": svg, "texts": [{**ok, "px": 9.6}]}, 390) == ["'a' is 9.6 px"]
    assert problems_of({"svg": svg, "texts": [ok, {**ok, "s": "b", "l": 30, "r": 60}]}, 390) == ["'a' overlaps 'b'"]
    assert problems_of({"svg": svg, "texts": [{**ok, "r": 345}]}, 390) == ["'a' runs past the picture's edge"]
    assert problems_of({"svg": {**svg, "r": 400}, "texts": []}, 390) == [
        "the picture spans 0..400 px of a 390 px screen"
    ]
