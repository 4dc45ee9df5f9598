"""Template filters that turn plain messages into HTML."""

from app.web.filters import ticks


def test_ticks_shows_code_spans_as_code_and_escapes_the_rest():
    html = str(ticks("make one with `zip -r bundle.zip .` in the <out> folder"))
    assert html == "make one with <code>zip -r bundle.zip .</code> in the &lt;out&gt; folder"
    assert str(ticks("a `<script>` here")) == "a <code>&lt;script&gt;</code> here"


def test_ticks_leaves_an_unclosed_backtick_and_empty_text_alone():
    assert str(ticks("it's 5` long")) == "it&#39;s 5` long"
    assert str(ticks(None)) == ""
