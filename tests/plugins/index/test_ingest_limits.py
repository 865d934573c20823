"""Ingest bounds what a document becomes, not only the bytes sent: a small PDF whose pages
share one compressed content stream, or Markdown made of headings, is refused (413
`document_too_large`) while it is read, and nothing of it is stored."""

from __future__ import annotations

import time
import zlib

import pytest

from plugins.index import ingest
from tests.plugins.index.conftest import build
from tests.support import LocalServer

MAX_BYTES = 32_768  # the 16.5 kB PDF below passes the byte cap; its text would be ~1 MB


def shared_stream_pdf(pages: int, lines: int) -> bytes:
    """A PDF whose ``pages`` pages all show one compressed content stream of ``lines`` lines."""
    content = b"BT /F1 10 Tf 20 800 Td 12 TL\n" + b"".join(
        b"(word%05d lorem ipsum dolor sit amet consectetur) '\n" % i for i in range(lines)) \
        + b"ET\n"
    packed = zlib.compress(content, 9)
    objects = {1: b"<< /Type /Catalog /Pages 2 0 R >>",
               2: b"<< /Type /Pages /Kids [" + b" ".join(b"%d 0 R" % (10 + i)
                                                        for i in range(pages))
                  + b"] /Count %d >>" % pages,
               3: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
               4: b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(packed) + packed
                  + b"\nendstream"}
    for i in range(pages):
        objects[10 + i] = (b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources "
                           b"<< /Font << /F1 3 0 R >> >> /Contents 4 0 R >>")
    out, offsets = bytearray(b"%PDF-1.4\n"), {}
    for k in sorted(objects):
        offsets[k] = len(out)
        out += b"%d 0 obj\n" % k + objects[k] + b"\nendobj\n"
    size = max(objects) + 1
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % size
    for k in range(1, size):
        out += (b"%010d 00000 n \n" % offsets[k]) if k in offsets else b"0000000000 65535 f \n"
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (size, xref)
    return bytes(out)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    base = tmp_path_factory.mktemp("limits")
    with LocalServer(base / "home", plugins=["auth", "index"],
                     index={"max_document_bytes": MAX_BYTES}) as server:
        repo = base / "repo"
        repo.mkdir()
        (repo / "app.py").write_text("def main():\n    return 1\n")
        pid = server.register(repo)
        build(server, pid)
        yield server, pid


def post(server, pid, data: bytes, content_type: str, name: str):
    return server.request("POST", f"/v1/projects/{pid}/documents?name={name}", body=data,
                          headers={"Content-Type": content_type})


def stored(server, pid) -> list[str]:
    r = server.get(f"/v1/projects/{pid}/documents/ingested")
    assert r.status == 200, r.body
    return [d["name"] for d in r.json["items"]]


def test_a_pdf_that_becomes_too_much_text_is_refused_while_it_is_read(served):
    server, pid = served
    pdf = shared_stream_pdf(100, 200)
    assert len(pdf) < MAX_BYTES
    started = time.monotonic()
    r = post(server, pid, pdf, "application/pdf", "shared.pdf")
    assert r.status == 413 and r.error["code"] == "document_too_large", r.body
    assert r.error["details"] == {"max_bytes": MAX_BYTES, "max_chars": 4 * MAX_BYTES}
    assert "max_document_bytes" in r.error["message"]
    # stopped at the page that passed the bound (each page holds ~10 kB of text), not after
    # reading all 100
    page = int(r.error["message"].split("(by page ")[1].split(")")[0])
    assert page <= 4 * MAX_BYTES // 10_000 + 1, r.error["message"]
    assert time.monotonic() - started < 15
    assert "shared.pdf" not in stored(server, pid)
    hits = server.post(f"/v1/projects/{pid}/search", {"query": "word00042 lorem",
                                                      "mode": "keyword"}).json["results"]
    assert all(h["source"] != "ingested" for h in hits)


def test_extraction_stops_inside_a_page_that_passes_the_bound():
    """One page alone over the bound: pypdf's text is counted as it is produced."""
    pdf = shared_stream_pdf(1, 2000)
    with pytest.raises(ingest.TooLarge) as refused:
        ingest.to_text(pdf, "application/pdf", max_chars=5_000)
    assert refused.value.details == {"max_chars": 5_000} and "by page 1" in str(refused.value)
    assert len(ingest.to_text(pdf, "application/pdf")) > 90_000  # no bound: all of it


def test_markdown_that_becomes_too_many_sections_is_refused(served):
    server, pid = served
    md = "".join(f"# h{i}\n" for i in range(3000)).encode()
    assert len(md) < MAX_BYTES
    r = post(server, pid, md, "text/markdown", "headings.md")
    assert r.status == 413 and r.error["code"] == "document_too_large", r.body
    assert r.error["details"] == {"max_bytes": MAX_BYTES, "max_sections": 2000}
    assert "max_document_sections" in r.error["message"]
    assert "headings.md" not in stored(server, pid)
    # headings in fenced code are text: they make parts, not sections, and are taken
    fenced = ("# Spec\n\n```\n" + "".join(f"# h{i}\n" for i in range(3000)) + "```\n").encode()
    ok = post(server, pid, fenced, "text/markdown", "fenced.md")
    assert ok.status == 201 and ok.json["nodes"] < 50, ok.body


def test_documents_within_the_bounds_are_taken(served):
    server, pid = served
    r = post(server, pid, shared_stream_pdf(3, 20), "application/pdf", "small.pdf")
    assert r.status == 201, r.body
    assert [n["label"] for n in server.get(
        f"/v1/projects/{pid}/documents/{r.json['id']}").json["nodes"]][:2] == ["small.pdf",
                                                                                 "Page 1"]
    md = "".join(f"# h{i}\n" for i in range(1999)).encode()  # 2,000 nodes with the file's
    r = post(server, pid, md, "text/markdown", "edge.md")
    assert r.status == 201 and r.json["nodes"] == 2000, r.body
