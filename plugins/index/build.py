"""One build: walk → compare with the stored file states → parse what changed → embed
the texts that have no vector yet → write files, nodes, edges and FTS rows in one
transaction, so a cancelled or failed build leaves the previous index whole.

Embedding overlaps parsing: each ``embed_batch`` of new texts goes to a background thread
while the next files are parsed (the model releases the GIL, so parsing costs the build
little wall time). Vectors are keyed by the hash of the text they embed, so unchanged
functions, identical texts and renamed files cost no model time; vectors already computed by
a cancelled build are kept and reused by the next one."""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from neuralmind import TOKEN_COUNTER, Unavailable, estimate_tokens, gitinfo, now_iso
from plugins.index import chunker, resolve
from plugins.index.ignore import RuleSet
from plugins.index.keywords import node_keywords
from plugins.index.search import measure_hubs
from plugins.index.store import FileRow, IndexStore
from plugins.index.walker import FileEntry, contained, select, walk

BINARY_SNIFF = 8192
NOT_TEXT = "binary or not UTF-8 text"
BAD_NAME = "file name not valid UTF-8"
MINIFIED = "minified or generated (lines of thousands of characters)"
# a bundle's one line held every function's text, each cut at MAX_NODE_CHARS: a 1 MB file
# took minutes, gigabytes and a 1 GB index, for code no one searches
LONG_LINE, LONG_AVERAGE = 5_000, 500


def utf8_named(entries: list[FileEntry], skipped: Counter | None) -> list[FileEntry]:
    """The entries whose path is valid UTF-8, the others counted in ``skipped``. The OS hands
    any other name over with surrogates (PEP 383), which SQLite, JSON and a client cannot
    hold."""
    named = []
    for entry in entries:
        try:
            entry.path.encode("utf-8")
        except UnicodeEncodeError:
            continue
        named.append(entry)
    if skipped is not None:
        skipped[BAD_NAME] += len(entries) - len(named)
    return named


def walk_named(root: str, rules: RuleSet, check=lambda: None,
               skipped: Counter | None = None) -> list[FileEntry]:
    """The files a build considers: the walk's (:func:`walker.walk`, which counts the files
    over the size cap in ``skipped``) whose names are UTF-8 (the others counted too).
    ``validate`` compares the disk with the index through this and :func:`read_project_file`,
    so it leaves out exactly what a build leaves out."""
    return utf8_named(walk(root, rules, check, skipped), skipped)


def read_project_file(root: str, rel: str) -> tuple[bytes, str] | str | None:
    """:func:`read_text` of a project file, None when it is gone or a symlink on its way
    leads out of the project since the walk (:func:`walker.contained`)."""
    path = contained(root, rel)
    return read_text(path) if path else None


def read_text(path: str) -> tuple[bytes, str] | str | None:
    """The file's bytes and text; else why it is not indexed (:data:`NOT_TEXT`,
    :data:`MINIFIED`), or None when it cannot be read (gone since the walk)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    if b"\0" in data[:BINARY_SNIFF]:
        return NOT_TEXT
    try:
        # a leading byte-order mark is no text (Python and Markdown skip it; a parser handed
        # U+FEFF fails or misreads line 1); it precedes line 1, so line numbers are unchanged,
        # and the stored hash is of ``data``, the file's bytes as they are
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return NOT_TEXT
    if len(text) > LONG_AVERAGE * (text.count("\n") + 1) and \
            any(len(line) > LONG_LINE for line in text.split("\n")):
        return MINIFIED
    return data, text


def embed_text(settings, path: str, kind: str, qualname: str, text: str, docstring: str,
               whole: bool, signature: str) -> str | None:
    """What the node is embedded as: test code is cut at ``test_embed_chars``."""
    cut = settings.test_embed_chars if chunker.is_test(path) else settings.embed_chars
    return chunker.embed_text(kind, qualname, text, docstring, whole, cut, signature,
                              settings.embed_mode)


def stored_embed_text(settings, row) -> str | None:
    """:func:`embed_text` of a stored node row."""
    return embed_text(settings, row["path"], row["kind"], row["qualname"], row["text"],
                      row["docstring"], bool(row["whole"]), row["signature"])


def file_row(entry: FileEntry, data: bytes, text: str, settings,
             texts: dict[str, str], parsed: chunker.Parsed | None = None) -> FileRow:
    """A parsed file as rows (``parsed``: already parsed, an ingested document); its embed
    texts are added to ``texts`` by hash."""
    # an ingested document is prose whatever its name: the name rules are for project files
    named = "" if parsed else entry.path
    parsed = parsed or chunker.parse(entry.path, text)
    file_type = chunker.file_type_of(parsed.language, named)
    rows, seen = [], {}
    for node in parsed.nodes:
        key = f"{entry.path}\0{node.kind}\0{node.qualname}"
        seen[key] = seen.get(key, -1) + 1
        embed = embed_text(settings, entry.path, node.kind, node.qualname, node.text,
                           node.docstring, node.whole, node.signature)
        digest = hashlib.sha1(embed.encode()).hexdigest() if embed else None
        if embed:
            texts[digest] = embed
        label, body = node_keywords(node.qualname, node.signature, node.docstring, node.text)
        rows.append({
            "id": "n_" + hashlib.sha1(f"{key}\0{seen[key]}".encode()).hexdigest()[:16],
            "path": entry.path, "kind": node.kind, "name": node.name, "qualname": node.qualname,
            "signature": node.signature, "docstring": node.docstring, "line": node.line,
            "end_line": node.end_line, "language": parsed.language, "file_type": file_type,
            "parent": node.parent, "whole": int(node.whole), "text": node.text,
            "embed_hash": digest, "label": label, "body": body,
        })
    edges = [(e.src, e.kind, e.target, e.ref, e.alias, e.dst) for e in parsed.edges]
    return FileRow(entry.path, parsed.language, file_type, entry.size, entry.mtime_ns,
                   hashlib.sha1(data).hexdigest(), text.count("\n") + 1, estimate_tokens(text),
                   rows, edges)


def reindex_reason(full: bool, stamp: str | None, parse: str | None = str(chunker.PARSE)
                   ) -> str:
    """Why a build re-parsed files whose content did not change: ``full`` (asked for),
    ``settings`` (the index was made with another ``[index]`` embed_mode, embed_chars or
    test_embed_chars) or ``layout`` (another NeuralMind made it: its stamp — ``LAYOUT:mode:
    chars:test_chars`` today — is of another revision or form, or missing, as releases before
    the stamp left it; or its ``parse`` stamp is not :data:`chunker.PARSE`: edges or file
    types are read otherwise now)."""
    if full:
        return "full"
    parts = (stamp or "").split(":")
    same = len(parts) == 4 and parts[0] == str(chunker.LAYOUT) and parse == str(chunker.PARSE)
    return "settings" if same else "layout"


class Build:
    """Runs one build for a project. ``check`` raises to cancel; ``progress`` reports."""

    def __init__(self, kernel, project, store: IndexStore, rules: RuleSet, settings,
                 check: Callable[[], None] = lambda: None,
                 progress: Callable[..., None] = lambda **_: None):
        self.kernel, self.project, self.store, self.rules = kernel, project, store, rules
        self.settings, self.check, self.progress = settings, check, progress

    def run(self, *, full: bool = False, paths: set[str] | None = None) -> dict[str, Any]:
        started = time.perf_counter()
        root = str(self.project.path)
        skipped: Counter = Counter()
        if paths is None:
            entries, gone = walk_named(root, self.rules, self.check, skipped), None
        else:
            walked, gone = select(root, self.rules, paths)
            entries = utf8_named(walked, skipped)
        # every file the walk found counts in files_total, skipped or not (over the size cap,
        # a name not UTF-8 — left out before they are read — binary, minified): files_total =
        # the project's files indexed + files_skipped, whatever the reason
        unread = skipped.total()
        known = self.store.file_states()
        layout = (f"{chunker.LAYOUT}:{self.settings.embed_mode}:{self.settings.embed_chars}:"
                  f"{self.settings.test_embed_chars}")
        stamp = self.store.meta().get("embed_text")
        parse = self.store.meta().get("parse", "1")
        # vectors of another text layout, edges of another parser: re-parse everything (texts
        # unchanged keep their vectors)
        reparse = full or (paths is None and (stamp != layout or parse != str(chunker.PARSE)))
        self.progress(files_total=len(entries) + unread, files_done=unread, chunks_embedded=0,
                      chunks_total=0)
        changed: list[FileRow] = []
        touched, seen, texts = [], set(), {}
        reindexed = 0  # files re-parsed only because of ``reparse``: their content is the same
        with _Embedding(self) as embedding:
            for done, entry in enumerate(entries, start=1):
                if done % 100 == 0:
                    self.check()
                    self.progress(files_done=unread + done)
                old = known.get(entry.path)
                if not reparse and old and old[:2] == (entry.size, entry.mtime_ns):
                    seen.add(entry.path)
                    continue
                content = read_project_file(root, entry.path)
                if not isinstance(content, tuple):
                    if content:  # why it is not indexed
                        skipped[content] += 1
                    continue  # else gone since the walk, or led out of the project by a
                    # symlink since: not a file of the project now (dropped if it was indexed)
                seen.add(entry.path)
                data, text = content
                same = bool(old) and old[2] == hashlib.sha1(data).hexdigest()
                if same and not reparse:
                    touched.append((entry.path, entry.size, entry.mtime_ns))
                    continue
                reindexed += same
                changed.append(file_row(entry, data, text, self.settings, texts))
                if len(texts) >= self.settings.embed_batch:
                    embedding.submit(texts)
                    texts = {}
            self.progress(files_done=len(entries) + unread)
            if gone is None:
                deleted = [p for p in known if p not in seen]
            else:
                deleted = [p for p in known if p in gone or (p in paths and p not in seen)]
            embedding.submit({**texts, **self._unembedded()})
            embedded, reused, model_id = embedding.result()
        head = gitinfo.head(self.project.path) or None
        meta = {"built_at": now_iso(), "built_head": head or "", "token_counter": TOKEN_COUNTER}
        if paths is None:
            meta["embed_text"], meta["parse"] = layout, str(chunker.PARSE)
        if model_id:
            meta["model_id"] = model_id
        names = None if full else {n["name"] for f in changed for n in f.nodes}
        moved = bool(deleted) or any(f.path not in known for f in changed)
        links: dict[str, int] = {}
        self.store.apply(changed, deleted, touched, meta, now_iso(),
                         after=lambda conn: links.update(resolve.link(self.store, conn, names,
                                                                      moved)))
        if paths is None:
            self.store.drop_orphan_vectors()
        if model_id:  # a new text layout re-embeds what changed: measure every vector again
            measure_hubs(self.store, every=reparse)
        stats = self.store.stats()
        per = stats["languages"].values()
        return {
            "files_total": len(entries) + unread, "files_changed": len(changed) - reindexed,
            "files_reindexed": reindexed,
            "reindex_reason": reindex_reason(full, stamp, parse) if reindexed else None,
            "files_deleted": len(deleted), "files_skipped": skipped.total(),
            "skipped": {why: n for why, n in skipped.items() if n},
            "files": sum(v["files"] for v in per), "nodes": sum(v["nodes"] for v in per),
            "edges": sum(v["edges"] for v in per), "chunks_embedded": embedded,
            "vectors_reused": reused, "semantic": model_id is not None, "full": full,
            "edges_linked": links,
            "built_head": head, "duration_ms": round((time.perf_counter() - started) * 1000, 1),
        }

    def _unembedded(self) -> dict[str, str]:
        """Texts of nodes indexed while no model was available, by hash."""
        out = {}
        for row in self.store.unembedded():
            text = stored_embed_text(self.settings, row)
            if text:
                out[row["embed_hash"]] = text
        return out


class _Embedding:
    """A build's vectors, made on one background thread in the order texts are submitted
    (so a text submitted twice is embedded once), while the build goes on parsing. Leaving the
    block waits for the thread; a cancelled or failed build drops what was not started."""

    def __init__(self, build: Build):
        self.build, self.sent = build, set()
        self.embedded = self.reused = 0
        try:
            self.embedder = build.kernel.embedder
            self.model_id = self.embedder.model_id
        except Unavailable:
            self.embedder = self.model_id = None
        if self.model_id and build.store.meta().get("model_id", self.model_id) != self.model_id:
            build.store.forget_vectors()  # never mix two models' vectors in one index
        self.pool = ThreadPoolExecutor(1, "index-embed")
        self.pending = []
        self.total = 0  # texts sent to the model: what `chunks_embedded` counts up to

    def __enter__(self) -> _Embedding:
        return self

    def __exit__(self, *exc) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)

    def submit(self, texts: dict[str, str]) -> None:
        fresh = {h: t for h, t in texts.items() if h not in self.sent}
        self.sent.update(fresh)
        if not fresh or self.model_id is None:
            return
        missing = self.build.store.missing_vectors(fresh)
        self.reused += len(fresh) - len(missing)
        if missing:
            self.total += len(missing)
            self.build.progress(chunks_total=self.total)
            self.pending.append(self.pool.submit(self._embed, {h: fresh[h] for h in missing}))

    def result(self) -> tuple[int, int, str | None]:
        """``(embedded, reused, model_id)``; model_id None without a model."""
        for future in self.pending:
            future.result()
        return self.embedded, self.reused, self.model_id

    def _embed(self, texts: dict[str, str]) -> None:
        if self.model_id is None:
            return
        missing = sorted(texts, key=lambda h: len(texts[h]))
        batch = self.build.settings.embed_batch
        for start in range(0, len(missing), batch):
            self.build.check()
            keys = missing[start:start + batch]
            try:
                vectors = self.embedder.embed([texts[k] for k in keys])
            except Unavailable:
                self.model_id = None
                return
            self.build.store.put_vectors([(k, v.tobytes()) for k, v in zip(keys, vectors)])
            self.embedded += len(keys)
            self.build.progress(chunks_embedded=self.embedded)
