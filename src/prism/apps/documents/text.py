"""Text extraction and chunking of uploaded documents.

Extraction turns the stored content into plain text according to its content type: HTML loses its
markup, scripts and styles; Markdown loses its syntax (headings, emphasis, links keep their text);
CSV rows become lines of cells; JSON becomes the text of its string values with their keys. Chunking
cuts the text into windows of about `size` words that overlap by `overlap` words and prefer to end at
a paragraph or sentence boundary, so a passage is found whole by at least one chunk.
"""

from __future__ import annotations

import csv
import io
import json
import re
import unicodedata
from html.parser import HTMLParser
from typing import Any

from prism.kit.nul import NUL

CONTENT_TYPES = ("text/plain", "text/markdown", "text/html", "text/csv", "application/json")
_WORD = re.compile(r"\w+", re.UNICODE)
_SPACES = re.compile(r"[^\S\n]+")  # every run of whitespace but newlines, Unicode spaces included
_BLANK_LINES = re.compile(r" ?\n(?: ?\n)+ ?")  # once spaces are single: a blank line, however many
_SURROGATE = re.compile("[\ud800-\udfff]")


class ExtractionError(ValueError):
    """The content does not parse as its declared type."""


class _HtmlText(HTMLParser):
    _SKIP = frozenset({"script", "style", "head", "noscript", "template"})
    _BLOCK = frozenset({"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article",
                        "table", "ul", "ol", "pre", "blockquote", "title"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "body":  # `</head>` may be left out: the body ends whatever was skipped before it
            self._skipping = 0
        if tag in self._SKIP:
            self._skipping += 1
        elif tag in self._BLOCK:
            self.parts.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP and self._skipping:
            self._skipping -= 1
        elif tag in self._BLOCK:
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.parts.append(data)


# Each pattern runs in time linear in the text: no class crosses a line, and none can run past the next opener
# of its own kind (`[^\]]*` after every `[`, or `\s*` from every line start, made uploads of 20 KB cost seconds).
_MARKDOWN = (
    (re.compile(r"```[^\n]*\n"), ""),                                   # code fences (keep the code)
    (re.compile(r"!\[([^\[\]\n]*)\]\([^()\n]*\)"), r"\1"),                # images → alt text
    (re.compile(r"\[([^\[\]\n]+)\]\([^()\n]*\)"), r"\1"),                 # links → their text
    (re.compile(r"^[ \t]{0,3}#{1,6}[ \t]*", re.M), ""),                  # headings
    (re.compile(r"^[ \t]{0,3}>[ \t]?", re.M), ""),                       # quotes
    (re.compile(r"^[ \t]*[-*+][ \t]+", re.M), ""),                        # bullets
    (re.compile(r"\*\*([^*\n]+)\*\*|__([^_\n]+)__"), r"\1\2"),             # strong emphasis
    (re.compile(r"\*([^*\n]+)\*|_([^_\n]+)_|`([^`\n]+)`"), r"\1\2\3"),     # emphasis, inline code
)
# html.parser looks for the end of every construct it meets, and from one that has no end it searches the rest of
# the text, then reads the construct as text and goes on: quadratic (30 KB of `<a ` took 9 s, 40 KB of
# `<!-- x >` 0.4 s, growing with the square). So an opener with no end after it, which opens nothing, is escaped
# first and read as the same text: a `<` with no `>` before the next `<`; a comment with no `--\s*>` after it; a
# marked section with no end of its kind after it (`]]>`, or `]>` for Microsoft's `if`, `else`, `endif`), each
# end as html.parser's own patterns spell it.
_OPENER = re.compile(r"<(?:(?=[^<>]*(?:<|\Z))|(?P<comment>!--)|!\[(?P<section>[a-zA-Z][-_.a-zA-Z0-9]*))")
_COMMENT_END = re.compile(r"--\s*>")
_SECTION_ENDS = {**dict.fromkeys(("temp", "cdata", "ignore", "include", "rcdata"), re.compile(r"]\s*]\s*>")),
                 **dict.fromkeys(("if", "else", "endif"), re.compile(r"]\s*>"))}


def _markdown(text: str) -> str:
    for pattern, replacement in _MARKDOWN:
        text = pattern.sub(replacement, text)
    return text


def _last_start(pattern: re.Pattern[str], text: str) -> int:
    """Where the last match of `pattern` in `text` starts; -1 without one (its matches never overlap)."""
    return max((m.start() for m in pattern.finditer(text)), default=-1)


def _without_unterminated_openers(content: str) -> str:
    """`content` with the `<` of each opener html.parser would find no end for escaped (see _OPENER), in one pass."""
    comments_end = _last_start(_COMMENT_END, content)
    sections_end = {pattern: _last_start(pattern, content) for pattern in set(_SECTION_ENDS.values())}

    def ends(opener: re.Match[str]) -> bool:
        if opener.group("comment"):
            return comments_end >= opener.start() + 4  # html.parser looks for the end after `<!--`
        if opener.group("section"):
            pattern = _SECTION_ENDS.get(opener.group("section").lower())
            # an unknown keyword is refused by html.parser before any search: left to it
            return pattern is None or sections_end[pattern] >= opener.start() + 3
        return False  # a `<` with no `>` before the next `<`

    return _OPENER.sub(lambda m: m.group() if ends(m) else "&lt;" + m.group()[1:], content)


def _html(content: str) -> str:
    parser = _HtmlText()
    try:
        parser.feed(_without_unterminated_openers(content))
        parser.close()
    except (AssertionError, ValueError) as exc:  # html.parser's own refusals (`<![foo[`)
        raise ExtractionError(f"HTML does not parse: {exc}") from None
    return "".join(parser.parts)


def _json_text(value: Any) -> list[str]:
    """`key: value` lines of a JSON document's scalars, in document order. A loop, not recursion: a document
    may nest as deep as the parser allows."""
    lines: list[str] = []
    pending: list[tuple[str, Any]] = [("", value)]
    while pending:
        key, value = pending.pop()
        if isinstance(value, dict):
            pending.extend(reversed([(str(k), v) for k, v in value.items()]))
        elif isinstance(value, list):
            pending.extend(reversed([(key, v) for v in value]))
        elif value is not None and not isinstance(value, bool):
            lines.append(f"{key}: {value}" if key else str(value))
    return lines


def extract_text(content: str, content_type: str) -> str:
    if content_type == "text/html":
        text = _html(content)
    elif content_type == "text/markdown":
        text = _markdown(content)
    elif content_type == "text/csv":
        try:
            text = "\n".join(" | ".join(c.strip() for c in row) for row in csv.reader(io.StringIO(content)) if row)
        except csv.Error as exc:
            raise ExtractionError(f"CSV does not parse: {exc}") from exc
    elif content_type == "application/json":
        try:
            text = "\n".join(_json_text(json.loads(content)))
        except ValueError as exc:
            raise ExtractionError(f"JSON does not parse: {exc}") from exc
        except RecursionError:
            raise ExtractionError("JSON does not parse: nested deeper than Python's parser reads") from None
    else:
        text = content
    # NUL (a JSON `\u0000` decodes to one; the edge refuses it anywhere else in a request) cannot be stored in
    # PostgreSQL's text: read as the separator it stands for, so both engines store and find the same words.
    text = text.replace(NUL, " ") if NUL in text else text
    text = _SPACES.sub(" ", text)
    # Surrogates (a JSON `\ud800` decodes to one) cannot be stored as UTF-8: replaced, as a bad byte would be.
    text = text.encode("utf-8", "replace").decode("utf-8") if _SURROGATE.search(text) else text
    return _BLANK_LINES.sub("\n\n", text).strip()


def words(text: str) -> list[str]:
    """Word tokens (the unit of chunk sizes and of search), alike however the text spells them: NFKC puts a
    letter's combining accent back into the letter (decomposed NFD text, as macOS file names give it, split
    `café` into `cafe` at the accent) and compatibility forms (`ﬁ`, full-width letters) into plain ones; casefold
    is lower case that also matches `Straße` with `STRASSE`. Chunks and queries are tokenised alike, so either
    spelling finds the other."""
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def chunk_text(text: str, *, size: int, overlap: int) -> list[str]:
    """Windows of about `size` words, `overlap` words shared with the previous window."""
    spans = [m.span() for m in _WORD.finditer(text)]
    if not spans:
        return []
    chunks: list[str] = []
    start = 0
    while start < len(spans):
        end = min(start + size, len(spans))
        if end < len(spans):
            end = _boundary(text, spans, start, end)
        chunks.append(text[spans[start][0]:spans[end - 1][1]].strip())
        if end >= len(spans):
            break
        start = max(end - overlap, start + 1)
    return chunks


def _boundary(text: str, spans: list[tuple[int, int]], start: int, end: int) -> int:
    """Pull the window's end back (at most a third of it) to a paragraph, else a sentence, boundary."""
    floor = start + max(1, (end - start) * 2 // 3)
    gaps = {i: text[spans[i - 1][1]:spans[i][0]] for i in range(floor + 1, end + 1)}
    for ends_here in (lambda g: "\n\n" in g, lambda g: g[:1] in (".", "!", "?") and g[1:2].isspace()):
        for i in range(end, floor, -1):
            if ends_here(gaps[i]):
                return i
    return end
