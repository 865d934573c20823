"""Documents that are not in the repository — a design note, a spec, a vendor's PDF —
ingested into the project's index beside its files (``source: "ingested"``), so ``search``
and ``query`` find them.

Markdown and plain text are read as UTF-8; HTML is reduced to its text with its headings
kept (the standard ``html.parser``; scripts and styles dropped); PDF text is extracted page by
page with ``pypdf`` (pure Python, maintained, no system library), each page a section. The
text becomes ``section`` nodes under headings, parts of at most ``CHUNK_CHARS`` each, so a
hit names a passage, not a whole book.

What bytes become is bounded too, not only the bytes sent: a small PDF whose pages share one
compressed content stream, or Markdown made only of headings, turns a few kilobytes into
megabytes of text or thousands of sections (minutes of parsing and embedding in one request).
``to_text`` stops extracting once the text passes ``max_chars`` (checked while a PDF is read,
page by page and inside a page) and ``parse`` once a document passes ``max_nodes``; both raise
``TooLarge`` before anything is stored."""

from __future__ import annotations

import io
import os
import re
from html.parser import HTMLParser

from plugins.index.chunker import Node, Parsed
from plugins.index.parse_markdown import _HEADING, FENCE, fence_after, parse_markdown

# media type → how it is read; a `.ext` → media type, for JSON bodies that name no type
TYPES = {"text/markdown": "markdown", "text/x-markdown": "markdown", "text/plain": "text",
         "text/html": "html", "application/pdf": "pdf"}
EXTENSIONS = {".md": "text/markdown", ".markdown": "text/markdown", ".txt": "text/plain",
              ".text": "text/plain", ".html": "text/html", ".htm": "text/html",
              ".pdf": "application/pdf"}
CHUNK_CHARS = 1500
PREFIX = "ingested:"  # the index path of an ingested document: ingested:<id>/<name>
_NAME = re.compile(r"[\x00-\x1f\x7f/\\]")


class Unreadable(ValueError):
    """The document's bytes are not what its type says (broken PDF, invalid UTF-8 …)."""


class TooLarge(Exception):
    """The document becomes more text or sections than a request may index; ``details``
    names the bound that was passed (``max_chars`` or ``max_sections``)."""

    def __init__(self, message: str, details: dict):
        super().__init__(message)
        self.details = details


class _Over(Exception):
    """Raised from pypdf's text visitor to stop extracting a page mid-way."""


def _too_much_text(max_chars: int, where: str = "") -> TooLarge:
    return TooLarge(f"the document becomes more than {max_chars:,} characters of text{where}; "
                    "at most 4 × [index] max_document_bytes characters are indexed: split it",
                    {"max_chars": max_chars})


def clean_name(raw: str) -> str:
    """A document's name as stored: no folders, no control characters; ValueError if empty."""
    name = _NAME.sub("", os.path.basename(raw.replace("\\", "/"))).strip()
    if not name or name in (".", ".."):
        raise ValueError("a document needs a file name, e.g. design-notes.md")
    return name[:255]


def media_type(raw: str | None, name: str) -> str:
    """The media type of a JSON body: the one it names, else its name's extension, else
    plain text."""
    if raw:
        return raw.split(";")[0].strip().lower()
    return EXTENSIONS.get(os.path.splitext(name)[1].lower(), "text/plain")


def to_text(data: bytes, content_type: str, max_chars: int | None = None) -> str:
    """The document as Markdown-like text (headings as ``#`` lines); ``TooLarge`` once that
    text passes ``max_chars``."""
    kind = TYPES[content_type]
    if kind == "pdf":
        return _pdf(data, max_chars)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as ex:
        raise Unreadable(f"the document is not valid UTF-8 (byte {ex.start}); send text "
                         "as UTF-8") from None
    if "\x00" in text:
        raise Unreadable("the document holds NUL bytes: it is not text")
    text = _Html.text(text) if kind == "html" else text
    if max_chars is not None and len(text) > max_chars:  # UTF-8 and HTML never grow; a guard
        raise _too_much_text(max_chars)
    return text


def _pdf(data: bytes, max_chars: int | None = None) -> str:
    """Each page's text under a ``# Page N`` heading. With ``max_chars``, the text is counted
    as pypdf produces it, so a page (or a hundred pages sharing one content stream) stops
    being read as soon as the whole passes the bound, not after."""
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError
    parts: list[str] = []
    size = 0  # characters of the text so far, headings and separators included
    seen = {"page": 0, "over": False}  # this page's characters as pypdf reports them

    def count(text, *_):
        seen["page"] += len(text or "")
        if seen["over"] or size + seen["page"] > max_chars:
            seen["over"] = True  # sticky: pypdf swallows errors inside form XObjects
            raise _Over

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise Unreadable("the PDF is encrypted with a password")
        for number, page in enumerate(reader.pages, 1):
            seen["page"] = 0
            try:
                text = page.extract_text(visitor_text=None if max_chars is None else count)
            except _Over:
                text = None
            if seen["over"]:
                raise _too_much_text(max_chars, f" (by page {number})")
            text = (text or "").strip()
            if not text:
                continue
            part = f"# Page {number}\n\n{text}"
            size += len(part) + (2 if parts else 0)
            if max_chars is not None and size > max_chars:
                raise _too_much_text(max_chars, f" (by page {number})")
            parts.append(part)
    except (Unreadable, TooLarge):
        raise
    except (PyPdfError, ValueError, TypeError, KeyError, IndexError, OSError) as ex:
        raise Unreadable(f"the PDF could not be read: {str(ex)[:200] or type(ex).__name__}") \
            from None
    if not parts:
        raise Unreadable("the PDF holds no text (scanned pages need OCR first)")
    return "\n\n".join(parts)


class _Html(HTMLParser):
    """Text of an HTML page: block elements end lines, headings become ``#`` lines."""

    SKIP = {"script", "style", "template", "noscript", "svg", "head"}
    BLOCKS = {"p", "div", "br", "li", "tr", "section", "article", "pre", "blockquote", "table",
              "ul", "ol", "dd", "dt", "hr"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping = 0

    @classmethod
    def text(cls, html: str) -> str:
        parser = cls()
        parser.feed(html)
        parser.close()
        lines = [" ".join(line.split()) for line in "".join(parser.parts).splitlines()]
        return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()

    def handle_starttag(self, tag, attrs):
        if tag in self.SKIP:
            self.skipping += 1
        elif re.fullmatch(r"h[1-6]", tag):
            self.parts.append("\n\n" + "#" * int(tag[1]) + " ")
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag in self.SKIP:
            self.skipping = max(0, self.skipping - 1)
        elif re.fullmatch(r"h[1-6]", tag) or tag in self.BLOCKS:
            self.parts.append("\n\n" if tag[0] == "h" else "\n")

    def handle_data(self, data):
        if not self.skipping:
            self.parts.append(data)


def parse(name: str, text: str, max_nodes: int | None = None) -> Parsed:
    """Sections under the document's headings, each cut into parts of ≤ ``CHUNK_CHARS``:
    a section holds its own lines, up to its first sub-section. ``TooLarge`` once the
    document passes ``max_nodes`` nodes (sections and their parts, the file node included)."""
    if max_nodes is not None:
        _count_headings(text, max_nodes)
    parsed = parse_markdown(text, name)
    if max_nodes is not None and len(parsed.nodes) > max_nodes:
        raise _too_many_nodes(max_nodes, len(parsed.nodes))
    lines = text.splitlines()
    starts: dict[int, int] = {}
    for node in parsed.nodes:
        if node.parent is not None:
            starts.setdefault(node.parent, node.line)
    out = Parsed("markdown")
    index: dict[int, int] = {}
    for i, node in enumerate(parsed.nodes):
        own = "\n".join(lines[node.line - 1: starts.get(i, node.end_line + 1) - 1])
        parent = index.get(node.parent) if node.parent is not None else None
        pieces = _pieces(own)
        index[i] = out.add(Node(node.kind, node.name, node.qualname, node.line, node.end_line,
                                signature=node.signature, text=pieces[0], parent=parent,
                                whole=True))
        line = node.line + pieces[0].count("\n") + 1
        for k, piece in enumerate(pieces[1:], start=2):
            end = line + piece.count("\n")
            out.add(Node("section", f"{node.name} ({k})", f"{node.qualname} ({k})", line, end,
                         text=piece, parent=index[i], whole=True))
            line = end + 1
        if max_nodes is not None and len(out.nodes) > max_nodes:
            raise _too_many_nodes(max_nodes)
    return out


def _count_headings(text: str, max_nodes: int) -> None:
    """``TooLarge`` as soon as the headings ``parse_markdown`` would make sections of (those
    outside fenced code) pass ``max_nodes`` with the file node: a megabyte of headings is
    refused in a line scan, before a node is built."""
    found, fence = 1, ""
    for line in text.splitlines():
        if fence or FENCE.fullmatch(line):
            fence = fence_after(line, fence)
        elif line.lstrip().startswith("#") and _HEADING.match(line):
            found += 1
            if found > max_nodes:
                raise _too_many_nodes(max_nodes)


def _too_many_nodes(max_nodes: int, found: int | None = None) -> TooLarge:
    many = f"{found:,} sections" if found is not None else f"more than {max_nodes:,} sections"
    return TooLarge(f"the document becomes {many} (headings and parts of {CHUNK_CHARS:,} "
                    f"characters); at most {max_nodes:,} are indexed ([index] "
                    "max_document_sections): split it", {"max_sections": max_nodes})


def _pieces(text: str) -> list[str]:
    """``text`` in parts of at most ``CHUNK_CHARS``, cut between paragraphs where it can."""
    if len(text) <= CHUNK_CHARS:
        return [text.strip("\n")]
    out, cur = [], ""
    for para in re.split(r"(\n\s*\n)", text):
        while len(para) > CHUNK_CHARS:  # one paragraph longer than a part
            if cur:
                out.append(cur)
                cur = ""
            out.append(para[:CHUNK_CHARS])
            para = para[CHUNK_CHARS:]
        if len(cur) + len(para) > CHUNK_CHARS and cur.strip():
            out.append(cur)
            cur = ""
        cur += para
    if cur.strip():
        out.append(cur)
    return [p.strip("\n") for p in out if p.strip()] or [text[:CHUNK_CHARS]]
