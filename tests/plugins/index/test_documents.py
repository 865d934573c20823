"""Documents that are not in the repository: ingested as JSON or as the file itself
(Markdown, text, HTML, PDF), found by search and query, kept by builds and ignore rules,
read and deleted by id; limits and unreadable bodies refused with what is wrong."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.plugins.index.conftest import build
from tests.plugins.index.test_graph import write
from tests.support import LocalServer


def pdf(*pages: str) -> bytes:
    """A small valid PDF with one line of text per page (Helvetica), offsets computed."""
    objects = ["<< /Type /Catalog /Pages 2 0 R >>", None,
               "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    kids = []
    for text in pages:
        stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{stream.decode()}\nendstream")
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources "
                       f"<< /Font << /F1 3 0 R >> >> /Contents {len(objects)} 0 R >>")
        kids.append(f"{len(objects)} 0 R")
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(kids)} >>"
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += (f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n"
            "%%EOF\n").encode()
    return bytes(out)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    base = tmp_path_factory.mktemp("docs")
    with LocalServer(base / "home", plugins=["auth", "index"],
                     index={"max_document_bytes": 4096}) as server:
        pid = server.register(write(base / "repo", {"app.py": "def main():\n    return 1\n"}))
        build(server, pid)
        yield server, pid, base / "repo"


def ingest_raw(server, pid, data: bytes, content_type: str, name: str | None = "x"):
    query = f"?name={name}" if name is not None else ""
    return server.request("POST", f"/v1/projects/{pid}/documents{query}", body=data,
                          headers={"Content-Type": content_type})


def search(server, pid, query, **body):
    r = server.post(f"/v1/projects/{pid}/search", {"query": query, "n": 5, **body})
    assert r.status == 200, r.body
    return r.json["results"]


def test_a_markdown_document_is_searchable_and_answers_queries(served):
    server, pid, _ = served
    text = "# Refund policy\n\nRefunds are paid within five working days.\n\n## Exceptions\n\n" \
           "Gift cards are never refunded.\n"
    r = server.post(f"/v1/projects/{pid}/documents", {"name": "policy.md", "content": text})
    assert r.status == 201, r.body
    doc = r.json
    assert r.headers["location"] == f"/v1/projects/{pid}/documents/{doc['id']}"
    assert doc["source"] == "ingested" and doc["content_type"] == "text/markdown"
    assert doc["path"] == f"ingested:{doc['id']}/policy.md" and doc["nodes"] == 3
    hits = search(server, pid, "are gift cards refunded")
    assert hits[0]["label"] == "Refund policy > Exceptions" and hits[0]["source"] == "ingested"
    assert hits[0]["source_file"] == doc["path"] and hits[0]["file_type"] == "docs"
    answer = server.post(f"/v1/projects/{pid}/query", {"question": "how fast are refunds paid?",
                                                       "query_type": "docs"}).json
    assert "five working days" in answer["context"]
    full = server.get(f"/v1/projects/{pid}/documents/{doc['id']}").json
    assert full["text"] == text and [n["label"] for n in full["nodes"]] == [
        "policy.md", "Refund policy", "Refund policy > Exceptions"]
    by_path = server.get(f"/v1/projects/{pid}/documents?path={doc['path']}").json
    assert by_path["source"] == "ingested" and not by_path["stale"] and by_path["text"] == text


def test_the_file_itself_as_the_body_text_html_and_pdf(served):
    server, pid, _ = served
    r = ingest_raw(server, pid, b"Invoices are numbered per year.\n", "text/plain; charset=utf-8",
                   "invoices.txt")
    assert r.status == 201 and r.json["content_type"] == "text/plain"
    html = (b"<html><head><style>p{}</style><script>var x</script></head><body>"
            b"<h1>Shipping</h1><p>Parcels leave the warehouse at noon.</p></body></html>")
    r = ingest_raw(server, pid, html, "text/html", "shipping.html")
    assert r.status == 201, r.body
    full = server.get(f"/v1/projects/{pid}/documents/{r.json['id']}").json
    assert "var x" not in full["text"] and "# Shipping" in full["text"]
    r = ingest_raw(server, pid, pdf("Warranty lasts two years", "Batteries one year"),
                   "application/pdf", "warranty.pdf")
    assert r.status == 201, r.body
    full = server.get(f"/v1/projects/{pid}/documents/{r.json['id']}").json
    assert [n["label"] for n in full["nodes"]][1:] == ["Page 1", "Page 2"]
    assert search(server, pid, "batteries", mode="keyword")[0]["label"] == "Page 2"


def test_long_documents_are_cut_into_parts(served):
    server, pid, _ = served
    paragraph = "Lorem ipsum dolor sit amet consectetur. " * 10
    text = "# Handbook\n\n" + "\n\n".join(f"{i} {paragraph}" for i in range(8))
    doc = server.post(f"/v1/projects/{pid}/documents",
                      {"name": "handbook.md", "content": text}).json
    full = server.get(f"/v1/projects/{pid}/documents/{doc['id']}").json
    parts = [n for n in full["nodes"] if n["label"].startswith("Handbook")]
    assert len(parts) >= 2 and parts[1]["label"] == "Handbook (2)"


def test_documents_survive_builds_and_rules_and_delete_by_id(served):
    server, pid, root = served
    doc = server.post(f"/v1/projects/{pid}/documents",
                      {"name": "keep.md", "content": "# Keepsake\n\nA durable note.\n"}).json
    (root / "new.py").write_text("def added():\n    return 2\n")
    build(server, pid, full=True)
    server.post(f"/v1/projects/{pid}/ignore-rules", {"type": "extension", "value": ".md"})
    assert server.get(f"/v1/projects/{pid}/documents/{doc['id']}").status == 200
    assert search(server, pid, "durable keepsake note", mode="keyword")[0]["source"] == "ingested"
    assert server.delete(f"/v1/projects/{pid}/documents/{doc['id']}").status == 204
    r = server.get(f"/v1/projects/{pid}/documents/{doc['id']}")
    assert r.status == 404 and r.error["code"] == "document_not_found"
    assert server.delete(f"/v1/projects/{pid}/documents/{doc['id']}").status == 404
    assert all(h["source_file"] != doc["path"] for h in search(server, pid, "durable keepsake"))


@pytest.mark.parametrize("call, status, code, says", [
    (lambda s, p: ingest_raw(s, p, b"\x89PNG", "image/png", "logo.png"), 415,
     "unsupported_media_type", "application/pdf"),
    (lambda s, p: ingest_raw(s, p, b"text", "text/plain", None), 422, "validation_error",
     "needs ?name="),
    (lambda s, p: ingest_raw(s, p, b"x" * 5000, "text/plain", "big.txt"), 413,
     "document_too_large", "max_document_bytes"),
    (lambda s, p: ingest_raw(s, p, b"%PDF-1.4 broken", "application/pdf", "a.pdf"), 422,
     "document_unreadable", "PDF"),
    (lambda s, p: ingest_raw(s, p, b"caf\xe9", "text/plain", "a.txt"), 422,
     "document_unreadable", "UTF-8"),
    (lambda s, p: ingest_raw(s, p, b"   \n", "text/markdown", "a.md"), 422, "validation_error",
     "empty"),
    (lambda s, p: s.post(f"/v1/projects/{p}/documents", {"name": "//", "content": "x"}), 422,
     "validation_error", "file name"),
    (lambda s, p: s.post(f"/v1/projects/{p}/documents", {"name": "a.pdf", "content": "x",
                                                         "content_type": "application/pdf"}),
     422, "validation_error", "content_type"),
])
def test_refusals_say_what_is_wrong(served, call, status, code, says):
    server, pid, _ = served
    r = call(server, pid)
    assert r.status == status and r.error["code"] == code, r.body
    assert says in r.body.decode(), r.body


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content_type=st.sampled_from(["text/plain", "text/markdown", "text/html",
                                     "application/pdf", "application/json", "text/csv"]),
       body=st.binary(max_size=300), name=st.one_of(st.none(), st.text(max_size=20)))
def test_ingest_never_answers_500(served, content_type, body, name):
    import urllib.parse
    server, pid, _ = served
    query = f"?{urllib.parse.urlencode({'name': name})}" if name is not None else ""
    r = server.request("POST", f"/v1/projects/{pid}/documents{query}", body=body,
                       headers={"Content-Type": content_type})
    assert r.status in (201, 400, 413, 415, 422), (content_type, body, name, r.body)
