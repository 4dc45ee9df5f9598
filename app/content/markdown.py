"""Authored Markdown → safe HTML.

markdown-it-py parses (raw HTML in the source is *not* passed through: it is shown as text), then nh3
sanitizes the result against an allow-list, so neither a careless author nor a posted preview can put
script, event handlers or `javascript:` links on a page.

Math is left for KaTeX in the browser: `$…$` becomes `<span class="math-inline">TeX</span>` and a
`$$…$$` block becomes `<div class="math-display">TeX</div>`, the TeX HTML-escaped and untouched by
Markdown (underscores and asterisks in formulas stay as written). A `$` followed by a space or
a digit after the closing `$` is not math, so "$5 and $10" stays text.
"""

from __future__ import annotations

from functools import lru_cache

import nh3
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml

ALLOWED_TAGS = {
    "a",
    "abbr",
    "b",
    "blockquote",
    "br",
    "code",
    "dd",
    "del",
    "div",
    "dl",
    "dt",
    "em",
    "h3",
    "h4",
    "h5",
    "h6",
    "hr",
    "i",
    "kbd",
    "li",
    "ol",
    "p",
    "pre",
    "span",
    "strong",
    "sub",
    "sup",
    "table",
    "tbody",
    "td",
    "th",
    "thead",
    "tr",
    "ul",
}
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "abbr": {"title"},
    "ol": {"start"},
    "td": {"align"},
    "th": {"align"},
}
ALLOWED_CLASSES = {
    "span": {"math-inline"},
    "div": {"math-display"},
    "code": {f"language-{x}" for x in ("python", "cpp", "cuda", "bash", "text", "json", "yaml")},
}
URL_SCHEMES = {"http", "https", "mailto"}


def _math_inline(state, silent: bool) -> bool:
    src, start = state.src, state.pos
    if src[start] != "$" or src.startswith("$$", start):
        return False
    if start + 1 >= state.posMax or src[start + 1].isspace():
        return False
    end = start + 1
    while True:
        end = src.find("$", end)
        if end == -1 or end >= state.posMax:
            return False
        if src[end - 1] == "\\":  # an escaped dollar inside the formula
            end += 1
            continue
        break
    if src[end - 1].isspace() or (end + 1 < len(src) and src[end + 1].isdigit()):
        return False
    if not silent:
        token = state.push("math_inline", "span", 0)
        token.content = src[start + 1 : end]
        token.markup = "$"
    state.pos = end + 1
    return True


def _math_block(state, start_line: int, end_line: int, silent: bool) -> bool:
    begin = state.bMarks[start_line] + state.tShift[start_line]
    first = state.src[begin : state.eMarks[start_line]]
    if not first.startswith("$$"):
        return False
    rest = first[2:]
    if rest.rstrip().endswith("$$") and len(rest.strip()) >= 2:  # one-line $$ … $$
        content, line = rest.rstrip()[:-2], start_line
    else:
        lines, line, found = [rest], start_line, False
        while line + 1 < end_line:
            line += 1
            text = state.src[state.bMarks[line] + state.tShift[line] : state.eMarks[line]]
            if text.rstrip().endswith("$$"):
                lines.append(text.rstrip()[:-2])
                found = True
                break
            lines.append(text)
        if not found:
            return False
        content = "\n".join(lines)
    if silent:
        return True
    state.line = line + 1
    token = state.push("math_block", "div", 0)
    token.content = content.strip()
    token.markup = "$$"
    token.map = [start_line, state.line]
    return True


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable("table").enable("strikethrough")
    md.inline.ruler.before("escape", "math_inline", _math_inline)
    md.block.ruler.before("fence", "math_block", _math_block, {"alt": ["paragraph", "blockquote", "list"]})
    md.add_render_rule(
        "math_inline",
        lambda self, tokens, idx, options, env: f'<span class="math-inline">{escapeHtml(tokens[idx].content)}</span>',
    )
    md.add_render_rule(
        "math_block",
        lambda self, tokens, idx, options, env: f'<div class="math-display">{escapeHtml(tokens[idx].content)}</div>\n',
    )
    return md


def sanitize(html: str) -> str:
    """Keep only allowed tags, attributes, classes and URL schemes; drop script/style with their content."""
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        allowed_classes=ALLOWED_CLASSES,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer",
        strip_comments=True,
    )


def render_markdown(text: str | None) -> str:
    """Markdown block(s) → sanitized HTML (paragraphs, lists, code, tables, math spans)."""
    if not text:
        return ""
    return sanitize(_parser().render(text))


def render_inline(text: str | None) -> str:
    """One line of Markdown → sanitized HTML without a wrapping <p> (titles, options, table cells)."""
    if not text:
        return ""
    return sanitize(_parser().renderInline(text))
