"""What markdown becomes in the renderers saved notebooks meet, and what markdown cannot produce."""

from __future__ import annotations

from html.parser import HTMLParser

from markdown_it import MarkdownIt
from nbconvert.filters.markdown_mistune import markdown2html_mistune

__all__ = ["forbidden", "rendered"]

ALLOWED = {
    "p": set(),
    "code": {"class"},
    "pre": set(),
    "div": {"class"},
    "span": {"class"},
    "a": {"href", "class"},
    "strong": set(),
    "em": set(),
    "del": set(),
    "s": set(),
    "dl": set(),
    "dt": set(),
    "dd": set(),
    "ul": set(),
    "ol": {"start"},
    "li": set(),
    "blockquote": set(),
    "hr": set(),
    "br": set(),
    "table": set(),
    "thead": set(),
    "tbody": set(),
    "tr": set(),
    "th": {"style"},
    "td": {"style"},
    **{f"h{n}": {"id"} for n in range(1, 7)},  # nbconvert's anchors for headings
}
COMMONMARK = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, attrs))


def forbidden(html: str) -> list[str]:
    """Elements and attributes of ``html`` that markdown alone could not have produced."""
    parser = _Elements()
    parser.feed(html)
    problems = []
    for tag, attrs in parser.found:
        if tag not in ALLOWED:
            problems.append(f"<{tag}>")
        for name, value in attrs:
            if name not in ALLOWED.get(tag, set()):
                problems.append(f"<{tag} {name}>")
            elif name == "href" and not (value or "").startswith(("http://", "https://", "#")):
                problems.append(f"<{tag} href={value}>")
            elif name == "style" and not (value or "").startswith("text-align:"):
                problems.append(f"<{tag} style={value}>")
    return problems


def rendered(markdown: str) -> dict[str, str]:
    """``markdown`` as nbconvert (mistune) and a CommonMark renderer make it HTML."""
    return {"nbconvert": markdown2html_mistune(markdown), "commonmark": COMMONMARK.render(markdown)}
