"""Markdown that renders as text and markdown only, whatever a model (or a pasted prompt) wrote.

A saved notebook's transcript is read by renderers that let raw HTML through (nbconvert, JupyterLab
for outputs it trusts) or treat ``$…$`` as math, so text from a run is rewritten, not trusted:

* fenced code is fenced again, with a fence longer than any backtick run inside: shown as is;
* inline code keeps its text; code that would be markup if a renderer ended the span elsewhere
  (it holds ``<``, ``[``, ``]`` or ``$``) becomes an HTML ``code`` element whose every punctuation
  character is a character reference;
* everywhere else ``<``, ``[``, ``]``, backslashes, ``$`` and unpaired backticks are written as
  character references, so no HTML, link, image, reference definition, math or code fence can form;
* links to ``http(s)`` addresses stay links; images become links to where they are, so opening a
  notebook loads nothing.

Character references are text to every markdown renderer: they never turn back into markup.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterator

__all__ = ["code_span", "inert_markdown", "inert_text", "plain_text"]

_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
_BACKTICKS = re.compile(r"`+")
_LINK = re.compile(
    r"\[(?P<text>[^\[\]\n`\\<>]*)\]\((?P<url>https?://[^\s()<>\[\]\\`\"'$]+)\)", re.ASCII
)
_LANGUAGE = re.compile(r"[A-Za-z0-9_+#.\-]*")
_UNSAFE_IN_CODE = re.compile(r"[<\[\]$]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_PUNCTUATION = frozenset(string.punctuation)
_ESCAPES = {"<": "&lt;", "[": "&#91;", "]": "&#93;", "\\": "&#92;", "$": "&#36;", "`": "&#96;"}


def inert_markdown(text: str) -> str:
    """``text`` (markdown) rewritten: no renderer finds HTML, scripted links or images in it."""
    parts = [
        _fenced(body, info) if info is not None else _prose(body)
        for body, info in _blocks(_CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n")))
    ]
    return "\n\n".join(p for p in parts if p.strip())


def inert_text(text: str) -> str:
    """One line of plain text (a message, a name) for a markdown document: no markup at all."""
    return "".join(_ESCAPES.get(c, c) for c in " ".join(_CONTROL.sub(" ", text).split()))


def plain_text(text: str) -> str:
    """``text`` for a ``text/plain`` output: as written, without control characters."""
    return _CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))


def code_span(text: str) -> str:
    """``text`` as inline code, safe wherever a renderer decides the span ends."""
    content = text.replace("\n", " ")
    if not content:
        return ""
    if _UNSAFE_IN_CODE.search(content):
        return (
            "<code>"
            + "".join(_reference(c) if c in _PUNCTUATION else c for c in content)
            + "</code>"
        )
    longest = max((len(run) for run in _BACKTICKS.findall(content)), default=0)
    fence = "`" * (longest + 1)
    if content.startswith("`") or content.endswith("`") or content[:1] == content[-1:] == " ":
        content = f" {content} "  # a renderer strips one space on each side
    return f"{fence}{content}{fence}"


# --- blocks -------------------------------------------------------------------------------------


def _blocks(text: str) -> Iterator[tuple[str, str | None]]:
    """(body, info) of each part: info is None for prose, the info string for fenced code.

    Fences are found as CommonMark finds them at the top level: up to three spaces, three or more
    backticks (whose info string has no backtick) or tildes, closed by a run of the same character
    at least as long, or by the end of the text.
    """
    lines = text.split("\n")
    prose: list[str] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None or (opening[2][0] == "`" and "`" in opening[3]):
            prose.append(lines[i])
            i += 1
            continue
        if prose:
            yield "\n".join(prose), None
            prose = []
        indent, fence = len(opening[1]), opening[2]
        closing = re.compile(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        body: list[str] = []
        i += 1
        while i < len(lines) and not closing.match(lines[i]):
            line = lines[i]
            body.append(line[min(indent, len(line) - len(line.lstrip(" "))) :])
            i += 1
        i += 1
        yield "\n".join(body), opening[3].strip()
    if prose:
        yield "\n".join(prose), None


def _fenced(body: str, info: str) -> str:
    longest = max((len(run) for run in _BACKTICKS.findall(body)), default=0)
    fence = "`" * max(3, longest + 1)
    language = _LANGUAGE.match(info.split()[0] if info.split() else "")
    return f"{fence}{language[0] if language else ''}\n{body}\n{fence}"


def _prose(text: str) -> str:
    # Paragraph by paragraph: a code span never runs across a blank line.
    paragraphs = re.split(r"(\n[ \t]*\n)", text)
    return "".join(p if not p.strip() else _inline(p) for p in paragraphs)


# --- inline -------------------------------------------------------------------------------------


def _inline(text: str) -> str:
    out: list[str] = []
    i, end = 0, len(text)
    while i < end:
        char = text[i]
        if char == "\\" and i + 1 < end and text[i + 1] in _PUNCTUATION:
            out.append(_reference(text[i + 1]))  # the writer's escape: that character, as text
            i += 2
        elif char == "`":
            run = _run_length(text, i)
            close = _closing_run(text, i + run, run)
            if close is None:
                out.append("&#96;" * run)
                i += run
            else:
                out.append(code_span(_code_content(text[i + run : close])))
                i = close + run
        elif char in "![" and (link := _LINK.match(text, i + (char == "!"))) is not None:
            label = link["text"] or link["url"]
            shown = f"image: {label}" if char == "!" else label
            out.append(f"[{inert_text(shown)}]({link['url']})")
            i = link.end()
        else:
            out.append(_ESCAPES.get(char, char))
            i += 1
    return "".join(out)


def _run_length(text: str, start: int) -> int:
    end = start
    while end < len(text) and text[end] == "`":
        end += 1
    return end - start


def _closing_run(text: str, start: int, length: int) -> int | None:
    """Where a backtick run of exactly ``length`` starts at or after ``start``."""
    for match in _BACKTICKS.finditer(text, start):
        if len(match[0]) == length:
            return match.start()
    return None


def _code_content(raw: str) -> str:
    content = raw.replace("\n", " ")
    if len(content) > 1 and content[0] == content[-1] == " " and content.strip():
        content = content[1:-1]
    return content


def _reference(char: str) -> str:
    return f"&#{ord(char)};"
