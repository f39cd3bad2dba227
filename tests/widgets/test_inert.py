"""Transcript markdown renders as text and markdown only, in the renderers saved notebooks meet."""

from __future__ import annotations

import random

import pytest
from nbconvert.filters.markdown_mistune import markdown2html_mistune

from neta_jupyter.widgets.inert import code_span, inert_markdown, inert_text, plain_text
from tests.markdown_html import forbidden, rendered

A = "http://127.0.0.1:9"
PAYLOADS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<svg onload=alert(1)><circle r=4 /></svg>",
    "<iframe src='javascript:alert(1)'></iframe>",
    '<iframe srcdoc="<script>alert(1)</script>"></iframe>',
    "<a href='javascript:alert(1)'>click</a>",
    "<style>body { background: url(http://127.0.0.1:9/style) }</style>",
    "<details open ontoggle=alert(1)>x</details>",
    "<object data=x></object><embed src=x>",
    f"![chart]({A}/image.png?d=secret)",
    f'![chart]({A}/image.png "title")',
    "![x](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+)",
    "[click](javascript:alert(1))",
    "[click](JaVaScRiPt:alert(1))",
    "[click](&#106;avascript:alert(1))",
    "[click](javascript\\:alert(1))",
    "[click](<javascript:alert(1)>)",
    "[c]: javascript:alert(1)\n\n[click][c] and [c]",
    "<javascript:alert(1)>",
    "<http://127.0.0.1:9/autolink>",
    "`<script>alert(1)</script>`",
    "``<img src=x onerror=alert(1)>``",
    "```\n<script>alert(1)</script>\n```",
    "~~~html\n<script>alert(1)</script>\n~~~",
    "````\n```\n<script>alert(1)</script>\n```\n````",
    "```unclosed\n<script>alert(1)</script>",
    "\\`<script>alert(1)</script>`",
    "http://a.b/`<img src=x onerror=alert(1)>`",
    "> ```\n> <script>alert(1)</script>\n\n<b onclick=alert(1)>x</b>",
    "- ```\n  <script>alert(1)</script>\n\n<i>y</i>",
    "1. x\n\n   ```\n   <script>alert(1)</script>\n   ```",
    "$\\href{javascript:alert(1)}{x}$ and $$\\style{position:fixed}{x}$$",
    "\\(\\href{javascript:alert(1)}{x}\\)",
    "<!-- comment --><scr<script>ipt>alert(1)</script>",
    "&lt;script&gt;alert(1)&lt;/script&gt;",
    "<form action=http://127.0.0.1:9><input type=password autofocus onfocus=alert(1)></form>",
    "    <script>indented</script>",
    "| a | b |\n|---|---|\n| <b>1</b> | `x<y` |",
]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_payloads_render_as_text(payload: str) -> None:
    markdown = inert_markdown(f"Here it is: {payload} and more.")
    for renderer, html in rendered(markdown).items():
        assert forbidden(html) == [], (renderer, markdown, html)
        assert "$" not in markdown.replace("&#36;", "") or "```" in markdown


def test_markdown_still_reads_as_markdown() -> None:
    answer = (
        "## Result\n\nThe mean is **3** (see `df.x.mean()`), *not* 4:\n\n"
        "- one\n- two\n\n```python\nprint(df[df.x < 3])\n```\n\n"
        "| col | n |\n|---|---|\n| x | 2 |\n\n"
        "Docs: [pandas](https://pandas.pydata.org/docs/) and ![plot](https://example.com/p.png)"
    )
    html = markdown2html_mistune(inert_markdown(answer))
    assert '<h2 id="Result">Result' in html and "<strong>3</strong>" in html
    assert "<code>df.x.mean()</code>" in html and "<em>not</em>" in html
    assert "<li>one</li>" in html and "<table>" in html
    assert "df" in html and "&lt;" in html and "highlight" in html, "the code block stays code"
    assert '<a href="https://pandas.pydata.org/docs/">pandas</a>' in html
    assert '<a href="https://example.com/p.png">image: plot</a>' in html, "an image is a link"
    assert "<img" not in html


def test_code_keeps_its_text() -> None:
    assert code_span("df[df.x < 3]") == ("<code>df&#91;df&#46;x &#60; 3&#93;</code>"), (
        "code a renderer could end elsewhere is an element with references only"
    )
    assert code_span("a`b") == "``a`b``" and code_span("`x`") == "`` `x` ``"
    html = markdown2html_mistune(code_span("df[df.x < 3]"))
    assert html == "<p><code>df[df.x &lt; 3]</code></p>\n"
    fenced = inert_markdown("```\n`` x ```` y\n```")
    assert fenced.startswith("`````\n") and fenced.endswith("\n`````")
    assert inert_text("a <b>\n[c](d) $e$") == "a &lt;b> &#91;c&#93;(d) &#36;e&#36;"
    assert plain_text("keep <b>this</b>\x1b[2J\x07 as is") == "keep <b>this</b>[2J as is"


def test_random_markdown_never_yields_html() -> None:
    pieces = [
        "<", ">", "`", "``", "```", "~~~", "[", "]", "(", ")", "!", "\\", "$", "&", "#", "*",
        "_", "|", " ", "  ", "    ", "\n", "\n\n", "> ", "- ", "1. ", "a", "x y", '"', "'",
        "=", "javascript:", "http://x.y/", "script", "img src=x onerror=alert(1)", "&#106;",
        "&lt;", "&#60;", "/", "-", ":", "www.", "style", "iframe",
    ]  # fmt: skip
    rng = random.Random(20260724)
    for _ in range(3000):
        source = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 40)))
        markdown = inert_markdown(source)
        for renderer, html in rendered(markdown).items():
            assert forbidden(html) == [], (renderer, source, markdown, html)
