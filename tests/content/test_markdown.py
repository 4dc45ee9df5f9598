"""Authored Markdown: XSS stripped, math preserved for KaTeX, links kept."""

from html.parser import HTMLParser

import pytest

from app.content.markdown import render_inline, render_markdown

XSS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[click](javascript:alert(1))",
    "[click](JaVaScRiPt:alert(1))",
    "[click](data:text/html;base64,PHNjcmlwdD4=)",
    '<a href="javascript:alert(1)">x</a>',
    "<svg onload=alert(1)>",
    "<iframe src=https://evil.example></iframe>",
    "![x](javascript:alert(1))",
    '<div style="background:url(javascript:alert(1))">x</div>',
    "$x</span><script>alert(1)</script>$",
    "$$\n</div><img src=x onerror=alert(1)>\n$$",
]


class _Elements(HTMLParser):
    def __init__(self, html):
        super().__init__()
        self.found = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, dict(attrs)))


@pytest.mark.parametrize("source", XSS)
def test_xss_is_neutralised(source):
    for tag, attrs in _Elements(render_markdown(source)).found:  # real elements, not escaped text
        assert tag not in {"script", "img", "iframe", "svg", "style", "object", "embed"}
        assert not any(name.startswith("on") or name == "style" for name in attrs), (tag, attrs)
        for name in ("href", "src"):
            if name in attrs:
                assert attrs[name].split(":")[0].lower() in {"http", "https", "mailto"}, attrs


def test_inline_math_is_wrapped_and_escaped():
    html = render_markdown(r"scale $s = \text{max} / a_1 < 2^{k}$ here")
    assert '<span class="math-inline">s = \\text{max} / a_1 &lt; 2^{k}</span>' in html
    assert "<em>" not in html  # underscores inside math are not emphasis


def test_display_math_block():
    html = render_markdown("Before\n\n$$\nT = c + m - o\n$$\n\nAfter")
    assert '<div class="math-display">T = c + m - o</div>' in html
    assert "<p>Before</p>" in html and "<p>After</p>" in html
    assert '<div class="math-display">x^2</div>' in render_markdown("$$ x^2 $$")


def test_dollar_amounts_are_not_math():
    html = render_markdown("It costs $5 and $10 per hour.")
    assert "math-inline" not in html and "$5 and $10" in html


def test_math_in_code_is_left_alone():
    html = render_markdown("`$x$` and\n\n```python\ncost = '$y$'\n```")
    assert "math-inline" not in html and "<code>$x$</code>" in html


def test_links_are_kept_with_rel():
    html = render_markdown('[TE docs](https://docs.nvidia.com/deeplearning/transformer-engine/ "TE")')
    assert 'href="https://docs.nvidia.com/deeplearning/transformer-engine/"' in html
    assert 'rel="noopener noreferrer"' in html and 'title="TE"' in html


def test_common_markdown_survives():
    html = render_markdown("**bold** _it_ `code`\n\n- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 |")
    for tag in ("<strong>", "<em>", "<code>", "<ul>", "<li>", "<table>", "<td>"):
        assert tag in html
    assert '<code class="language-python">' in render_markdown("```python\nx = 1\n```")


def test_render_inline_has_no_paragraph():
    assert render_inline("**E4M3** max $448$") == '<strong>E4M3</strong> max <span class="math-inline">448</span>'
    assert render_inline(None) == "" and render_markdown("") == ""


def test_sanitize_is_the_last_line_of_defence():
    from app.content.markdown import sanitize

    html = sanitize(
        '<a href="javascript:alert(1)" onclick="x()">t</a><span class="evil math-inline">m</span>'
        '<script>bad()</script><p style="color:red">ok</p>'
    )
    assert html == '<a rel="noopener noreferrer">t</a><span class="math-inline">m</span><p>ok</p>'
