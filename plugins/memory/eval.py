"""``neuralmind eval memory``: retrieval quality of keyword, semantic and hybrid search.

A dataset is loaded into a throwaway store through :class:`MemoryStore` (kept in ``--work``
so vectors are embedded once), every query runs through the same :class:`Searcher` the
server uses, and recall@1/5/10, MRR@10 and nDCG@10 are printed per mode and per query kind.
Two layouts are read: BEIR (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``) and
LoCoMo (``*.json`` lists of conversations; each conversation is its own store, each dialogue
turn one record whose title carries the speaker and the session date).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from neuralmind import today, unreachable
from plugins.memory import records
from plugins.memory.decay import policy_of
from plugins.memory.models import MemorySettings
from plugins.memory.rerank import shipped
from plugins.memory.search import Searcher
from plugins.memory.store import MIGRATIONS, MemoryStore

METRICS = ("recall@1", "recall@5", "recall@10", "mrr@10", "ndcg@10")
LAYOUT_VERSION = "2"  # bump when the record text changes, so cached stores are rebuilt
MODES = ("keyword", "semantic", "hybrid")
SHOWN = ("rerank", "floor", "passages", "session_context")  # settings each run prints


@dataclass
class Collection:
    """Documents that share one store, and the queries asked of them."""

    name: str
    docs: list[tuple[str, str, str]]  # (id, title, text)
    queries: list[tuple[str, str, set[str]]] = field(default_factory=list)  # (text, kind, gold)
    sessions: dict[str, tuple[str, str]] = field(default_factory=dict)  # id: (session, created_at)


class BadDataset(ValueError):
    """A dataset file that is not what its layout says; the message names the file (and the
    line), for one line on stderr and exit 2."""


def _not_json(path: Path, ex: json.JSONDecodeError, line: int | None = None) -> BadDataset:
    where = f" line {line}" if line is not None else ""
    at = f"column {ex.colno}" if line is not None else f"line {ex.lineno}, column {ex.colno}"
    return BadDataset(f"{path}{where} is not JSON ({ex.msg.removesuffix(' at')}, {at})")


def read_json(path: Path):
    """A whole JSON file, past a leading byte-order mark (``utf-8-sig``: an editor on Windows
    writes one, and RFC 8259 lets a reader skip it — so do these dataset readers);
    :class:`BadDataset` naming it when it is not UTF-8 JSON (an OSError, for the caller to
    word, when it cannot be read)."""
    try:
        return json.loads(path.read_text(encoding="utf-8-sig"))
    except UnicodeDecodeError:
        raise BadDataset(f"{path} is not UTF-8 text") from None
    except json.JSONDecodeError as ex:
        raise _not_json(path, ex) from None


def _jsonl(path: Path, needs: tuple[str, ...]):
    """``(line number, object)`` for each line of a JSONL file that is not blank, each a JSON
    object holding ``needs`` as text (``_id`` may be a number); :class:`BadDataset` naming
    the file and the line of the first that is not."""
    with open(path, encoding="utf-8-sig") as fh:  # a byte-order mark is skipped (read_json)
        try:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as ex:
                    raise _not_json(path, ex, n) from None
                if not isinstance(obj, dict):
                    raise BadDataset(f"{path} line {n} is not a JSON object")
                for key in needs:
                    value = obj.get(key)
                    if not (isinstance(value, str) or key == "_id" and isinstance(value, int)
                            and not isinstance(value, bool)):
                        raise BadDataset(f"{path} line {n}: {key} is "
                                         + ("missing" if value is None else "not text"))
                for key in ("title", "text"):
                    if obj.get(key) is not None and not isinstance(obj[key], str):
                        raise BadDataset(f"{path} line {n}: {key} is not text")
                yield n, obj
        except UnicodeDecodeError:
            raise BadDataset(f"{path} is not UTF-8 text") from None


def load_beir(root: Path, split: str) -> list[Collection]:
    docs = []
    for _, d in _jsonl(root / "corpus.jsonl", ("_id",)):
        text = d.get("text") or ""
        docs.append((str(d["_id"]), d.get("title") or text[:80] or str(d["_id"]), text or "-"))
    texts = {}
    for _, q in _jsonl(root / "queries.jsonl", ("_id", "text")):
        texts[str(q["_id"])] = q["text"]
    gold: dict[str, set[str]] = {}
    qrels = root / "qrels" / f"{split}.tsv"
    with open(qrels, encoding="utf-8-sig") as fh:  # no byte-order mark in the first query id
        try:
            for n, line in enumerate(fh):
                parts = line.rstrip("\n").split("\t")
                if n == 0 and not parts[-1].strip().lstrip("-").isdigit():
                    continue  # header
                if len(parts) < 3:
                    continue
                try:
                    relevant = float(parts[2]) > 0
                except ValueError:
                    raise BadDataset(f"{qrels} line {n + 1}: the score {parts[2]!r} is not a "
                                     "number (query-id, corpus-id, score: tab-separated)") from None
                if relevant:
                    gold.setdefault(parts[0], set()).add(parts[1])
        except UnicodeDecodeError:
            raise BadDataset(f"{qrels} is not UTF-8 text") from None
    col = Collection(root.name, docs)
    col.queries = [(texts[q], "all", rel) for q, rel in gold.items() if q in texts]
    if not col.queries:
        asked = f"{len(texts)} quer{'y' if len(texts) == 1 else 'ies'}"
        raise BadDataset(f"no query has a gold answer: {qrels} gives a relevant document "
                         f"(query-id, corpus-id, score above 0: tab-separated) to none of the "
                         f"{asked} of {root / 'queries.jsonl'}")
    return [col]


def session_start(date: str, number: int) -> dt.datetime:
    """A LoCoMo session's date-time (``1:56 pm on 8 May, 2023``), or day ``number`` of 2000."""
    try:
        return dt.datetime.strptime(date.strip(), "%I:%M %p on %d %B, %Y")
    except ValueError:
        return dt.datetime(2000, 1, 1) + dt.timedelta(days=number)


def load_locomo(root: Path) -> list[Collection]:
    """One collection per conversation; each turn is stored with its session (``<sample>:
    <session>``) and a ``created_at`` one second after the turn before it."""
    out = []
    for path in sorted(root.glob("*.json")):
        convs = read_json(path)
        if not isinstance(convs, list):
            raise BadDataset(f"{path} does not hold a JSON list of LoCoMo conversations")
        try:
            out.extend(_conversations(path, convs, len(out)))
        except (KeyError, TypeError, AttributeError, ValueError) as ex:
            what = f"has no {ex.args[0]!r}" if isinstance(ex, KeyError) else f"is not as it " \
                f"should be ({ex})"
            raise BadDataset(f"{path} is not a list of LoCoMo conversations: a conversation "
                             f"{what}") from None
    if not any(col.queries for col in out):
        raise BadDataset(f"no question has a gold answer: none in {root}/*.json has evidence "
                         "naming one of its turns (category 5 is left out)")
    return out


def _conversations(path: Path, convs: list, count: int) -> list[Collection]:
    """The collections of one LoCoMo file (``count``: those of the files before it)."""
    out = []
    for conv in convs:
        c = conv["conversation"]
        name = f"{path.stem}-{conv.get('sample_id', count + len(out))}"
        docs, sessions = [], {}
        for number, (key, turns) in enumerate(c.items()):
            if not (key.startswith("session_") and isinstance(turns, list)):
                continue
            date = c.get(f"{key}_date_time", "")
            start = session_start(date, number)
            for i, t in enumerate(turns):
                text = t.get("text") or "-"
                if t.get("blip_caption"):
                    text += f" [shares a photo: {t['blip_caption']}]"
                mid = t["dia_id"].strip()
                docs.append((mid, f"{t['speaker']} on {date}", text))
                at = (start + dt.timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
                sessions.setdefault(mid, (f"{name}:{key}", at))
        col = Collection(name, docs, sessions=sessions)
        ids = {d[0] for d in docs}
        for qa in conv["qa"]:
            cat = qa.get("category")
            gold = {e for ev in qa.get("evidence", []) for e in re.split(r"[;,\s]+", ev)
                    if e in ids}
            if cat == 5 or not gold or "question" not in qa:
                continue  # category 5 is unanswerable by design
            col.queries.append((qa["question"], f"category {cat}", gold))
        out.append(col)
    return out


def load(root: Path, split: str) -> list[Collection]:
    if (root / "corpus.jsonl").is_file():
        return load_beir(root, split)
    if any(root.glob("*.json")):
        return load_locomo(root)
    raise BadDataset(f"{root} is neither a BEIR folder nor LoCoMo *.json files")


def open_store(kernel, work: Path, col: Collection) -> MemoryStore:
    """The collection's store — in ``work``, or with ``[storage] backend = "postgres"`` a
    project of the database named ``eval:<collection>`` — loaded once; reused while its
    records match."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", col.name)
    folder = work / name
    want = {"layout": LAYOUT_VERSION, "docs": len(col.docs),
            "sha": hashlib.sha1("".join(d[0] for d in col.docs).encode()).hexdigest()}
    shared = kernel.shared_database("memory", None)
    if shared is not None:
        from plugins.memory.pgstore import PgMemoryStore
        store = PgMemoryStore(shared, f"eval:{name}")
        if store.config("eval_loaded") == want:
            return store
        with store.writing() as w:
            w.conn.execute("DELETE FROM memories")
            w.conn.execute("DELETE FROM memory_events")
        load_into(store, col, folder)
        with store.writing() as w:
            w.put_config("eval_loaded", want)
        return store
    marker = folder / "loaded.json"
    if marker.is_file() and json.loads(marker.read_text()) == want:
        return MemoryStore(kernel.open_database(folder / "memory.db", MIGRATIONS))
    shutil.rmtree(folder, ignore_errors=True)
    store = MemoryStore(kernel.open_database(folder / "memory.db", MIGRATIONS))
    load_into(store, col, folder)
    marker.write_text(json.dumps(want))
    return store


def load_into(store: MemoryStore, col: Collection, folder: Path) -> None:
    """Every document of ``col`` as a record (its session and time with it), 1,000 a batch."""
    now = "2000-01-01T00:00:00.000Z"
    ops, seen = [], set()
    for mid, title, text in col.docs:
        if mid in seen:
            continue
        seen.add(mid)
        session, created = col.sessions.get(mid, (None, now))
        rec = records.build({"id": mid, "title": title, "rationale": text, "session_id": session},
                            root=folder, now=created, head="", errors=[])
        ops.append(("create", rec, records.content_sha(rec), {}, "eval"))
    for i in range(0, len(ops), 1000):
        store.apply_batch(ops[i:i + 1000], now)


def embed_all(searcher: Searcher, store: MemoryStore, embedder, name: str) -> None:
    total = len(store.missing_vectors(embedder.model_id))
    if not total:
        return
    started, done = time.monotonic(), [0]

    def progress() -> bool:
        done[0] += 1
        print(f"\r  {name}: embedding {min(done[0] * 128, total)}/{total} "
              f"({time.monotonic() - started:.0f} s)", end="", file=sys.stderr, flush=True)
        return False

    searcher.fill(store, embedder, batch=128, stop=progress)
    print(file=sys.stderr)


def score(ranked: list[str], gold: set[str]) -> dict[str, float]:
    top = ranked[:10]
    out = {f"recall@{k}": len(set(ranked[:k]) & gold) / len(gold) for k in (1, 5, 10)}
    first = next((i for i, mid in enumerate(top) if mid in gold), None)
    out["mrr@10"] = 0.0 if first is None else 1.0 / (first + 1)
    dcg = sum(1.0 / math.log2(i + 2) for i, mid in enumerate(top) if mid in gold)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(gold), 10)))
    out["ndcg@10"] = dcg / ideal
    return out


def variant(spec: str, base: MemorySettings) -> tuple[str, MemorySettings]:
    """``rrf:K``, ``blend:W`` (keyword weight), ``floor:C`` (hybrid floor), each without the
    second stage; the legs' pools are the base settings' (variants re-fuse the same two legs)."""
    kind, _, value = spec.partition(":")
    make = {"rrf": lambda v: {"fusion": "rrf", "rrf_k": int(v or 60)},
            "blend": lambda v: {"fusion": "blend", "keyword_weight": float(v or 0.5)},
            "floor": lambda v: {"hybrid_floor": float(v or 0.3)}}.get(kind)
    try:
        updates = make(value) if make else None
    except ValueError:
        updates = None
    if updates is None:
        raise ValueError(f"unknown fusion variant {spec!r} (rrf:K, blend:W, floor:C)")
    try:
        return f"hybrid[{spec}]", MemorySettings(**{**base.model_dump(), **updates,
                                                    "rerank": False})
    except ValidationError as ex:
        raise ValueError(f"fusion variant {spec!r}: {ex.errors()[0]['msg']}") from None


def query_key(collection: str, text: str) -> str:
    """A query's name in the ranker's training (``bench/train_ranker.py``): its collection
    and text."""
    return hashlib.sha1(f"{collection}\n{text}".encode()).hexdigest()[:16]


def digest(collections: list[Collection]) -> str:
    """One name for a dataset's queries, to tell whether the shipped ranker was trained on them."""
    keys = sorted(query_key(c.name, q[0]) for c in collections for q in c.queries)
    return hashlib.sha1("\n".join(keys).encode()).hexdigest()[:16]


class Folds:
    """The ranker's out-of-fold models (``bench/train_ranker.py`` writes them): each training
    query is ranked by the model that did not see it, the honest figure on a training set."""

    def __init__(self, path: Path):
        """:class:`BadDataset` naming ``path`` when it cannot be read or is not the folds."""
        from plugins.memory.rerank import Model
        try:
            data = read_json(path)
        except FileNotFoundError:
            raise BadDataset(f"no such file: {path}") from None
        except IsADirectoryError:
            raise BadDataset(f"{path} is a folder, not a file") from None
        except OSError as ex:
            raise BadDataset(f"cannot read {path}: {(ex.strerror or str(ex)).lower()}") from None
        shape = (f"{path} does not hold the ranker's folds: a JSON object with models (a list "
                 "of models) and folds (query key: the number of the model that did not see it)")
        if not (isinstance(data, dict) and isinstance(data.get("models"), list)
                and isinstance(data.get("folds"), dict)):
            raise BadDataset(shape)
        if not all(isinstance(f, int) and not isinstance(f, bool)
                   and 0 <= f < len(data["models"]) for f in data["folds"].values()):
            raise BadDataset(f"{shape}; a fold number is not one of its "
                             f"{len(data['models'])} models")
        try:
            self.models = [Model(spec) for spec in data["models"]]
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as ex:
            raise BadDataset(f"{shape}; a model is not one the ranker reads "
                             f"({type(ex).__name__}: {ex})") from None
        self.fold_of: dict[str, int] = data["folds"]
        self.unseen = 0  # queries no fold holds: ranked by the shipped model

    def model(self, collection: str, text: str):
        fold = self.fold_of.get(query_key(collection, text))
        self.unseen += fold is None
        return None if fold is None else self.models[fold]


def load_queries(root: Path, split: str) -> list[str]:
    """Any eval set's query texts, to ask of another set's records: BEIR, LoCoMo or CoSQA."""
    cosqa = sorted(root.glob("cosqa-retrieval-*.json"))
    if cosqa:
        items = read_json(cosqa[0])
        if not (isinstance(items, list) and all(isinstance(q, dict) and isinstance(q.get("doc"),
                                                                                   str)
                                                for q in items)):
            raise BadDataset(f"{cosqa[0]} is not a JSON list of CoSQA pairs (each with doc)")
        return [q["doc"] for q in items]
    return [q[0] for col in load(root, split) for q in col.queries]


def answers(searcher: Searcher, store: MemoryStore, text: str, kw, leg, modes: list[str],
            limit: int, policy: dict | None = None) -> dict[str, list[str]]:
    """What each mode returns for one query, from legs already run (``leg`` None: no model)."""
    out = {}
    if "keyword" in modes:
        best = None if leg is None else (leg.hits[0][1] if leg.hits else -1.0)
        out["keyword"] = [r["id"] for r, _ in
                          searcher.keyword_results(store, text, kw[:limit], lambda: best)]
    if "semantic" in modes:
        out["semantic"] = [h[0] for h in searcher.semantic_results(leg)][:limit]
    if "hybrid" in modes:
        out["hybrid"] = [r["id"] for r, _ in searcher.hybrid(store, text, kw, leg, limit,
                                                                policy)]
    return out


def evaluate(collections: list[Collection], modes: list[str], settings: MemorySettings,
             variants: list[str], work: Path, kernel, semantic: bool,
             negatives: dict[str, list[str]] | None = None, folds: Folds | None = None,
             decay: bool = True) -> dict:
    """Every query of every collection in each mode; ``semantic=False`` never loads a model.
    Hybrid ranks with each store's decay policy (the default: on) unless ``decay`` is off.
    With the floor on, also what it costs (recall@10 the same modes lose to it); with
    ``negatives`` (``{set name: query texts}``), the share of those queries each mode
    answers with nothing, asked of every collection."""
    searcher = Searcher(settings, kernel)
    bare = (Searcher(settings.model_copy(update={"floor": False}), kernel)
            if settings.floor else None)
    extra = [(name, Searcher(s, kernel)) for name, s in
             (variant(v, settings) for v in variants)]
    embedder = kernel.embedder if semantic else None
    names = [*modes, *(name for name, _ in extra)]
    sums: dict[str, dict[str, dict[str, float]]] = {m: {} for m in names}
    counts: dict[str, int] = {}
    lost = dict.fromkeys(modes, 0.0)
    asked: dict[str, int] = {}
    empty: dict[str, dict[str, int]] = {}
    latency: dict[str, float] = {"keyword": 0.0, "semantic": 0.0}
    everything = {"status": "ALL"}
    on, limit = today(), 10
    pool = searcher.pool(limit)

    def legs(store, text):
        t0 = time.perf_counter()
        kw = searcher.keyword(store, text, everything, on, pool, full=False)
        t1 = time.perf_counter()
        leg = searcher.semantic(store, text, everything, on, pool) if embedder else None
        latency["keyword"] += t1 - t0
        latency["semantic"] += time.perf_counter() - t1
        return kw, leg

    for col in collections:
        store = open_store(kernel, work, col)
        policy = policy_of(store.config("decay")) if decay else None
        if embedder is not None:
            embed_all(searcher, store, embedder, col.name)
        for text, kind, gold in col.queries:
            counts[kind] = counts.get(kind, 0) + 1
            if folds is not None:
                searcher.ranker = folds.model(col.name, text)
            kw, leg = legs(store, text)
            ranked = answers(searcher, store, text, kw, leg, modes, limit, policy)
            for name, other in extra:
                ranked[name] = [r["id"] for r, _ in other.hybrid(store, text, kw, leg, limit,
                                                                policy)]
            for name in names:
                for metric, value in score(ranked[name], gold).items():
                    bucket = sums[name].setdefault(kind, dict.fromkeys(METRICS, 0.0))
                    bucket[metric] += value
            if bare is not None:
                bare.ranker = searcher.ranker
                unfloored = answers(bare, store, text, kw, leg, modes, limit, policy)
                for mode in modes:
                    lost[mode] += (score(unfloored[mode], gold)["recall@10"]
                                   - score(ranked[mode], gold)["recall@10"])
        searcher.ranker = None
        for name, texts in (negatives or {}).items():
            tally = empty.setdefault(name, dict.fromkeys(modes, 0))
            asked[name] = asked.get(name, 0) + len(texts)
            for text in texts:
                found = answers(searcher, store, text, *legs(store, text), modes, limit, policy)
                for mode in modes:
                    tally[mode] += not found[mode]
        store.db.close()
    total = sum(counts.values())
    result = {"queries": total, "by_kind": {}, "leg_ms": {k: round(v * 1000 / max(total, 1), 3)
                                                         for k, v in latency.items()}}
    for name in names:
        overall = {m: round(sum(b[m] for b in sums[name].values()) / max(total, 1), 4)
                   for m in METRICS}
        result[name] = overall
        result["by_kind"][name] = {k: {m: round(b[m] / counts[k], 4) for m in METRICS}
                                   for k, b in sorted(sums[name].items())}
    if bare is not None:
        result["floor_recall_lost"] = {m: round(v / max(total, 1), 4) for m, v in lost.items()}
    if negatives:
        n = sum(asked.values())
        result["negatives"] = {
            "queries": asked,
            "empty": {m: round(sum(t[m] for t in empty.values()) / max(n, 1), 4) for m in modes},
            "by_set": {name: {m: round(t[m] / max(asked[name], 1), 4) for m in modes}
                       for name, t in empty.items()}}
    return result


def table(result: dict, names: list[str]) -> str:
    lines = [f"{'mode':<22}" + "".join(f"{m:>11}" for m in METRICS)]
    for name in names:
        lines.append(f"{name:<22}" + "".join(f"{result[name][m]:>11.4f}" for m in METRICS))
        for kind, values in result["by_kind"][name].items():
            if len(result["by_kind"][name]) > 1:
                lines.append(f"  {kind:<20}" + "".join(f"{values[m]:>11.4f}" for m in METRICS))
    return "\n".join(lines)


def eval_kernel(work: Path, config: str | None = None, dsn: str | None = None):
    """A kernel of no plugins, at home in the work folder: the embedder, its int8 model cached
    there, and the side threads; nothing of the user's own home is touched. With ``dsn``,
    stores are projects of that PostgreSQL database (its memory tables migrated here)."""
    from neuralmind import Kernel, load_settings
    storage = {"backend": "postgres", "dsn": dsn} if dsn else {"backend": "sqlite"}
    kernel = Kernel(load_settings(config, kernel={"home": str(work / "home")},
                                  embeddings={"warm": False}, storage=storage),
                    plugins=[], load_entrypoints=False)
    if dsn:
        from plugins.memory.pgstore import PG_MIGRATIONS
        kernel.shared_database("memory", PG_MIGRATIONS)
    return kernel


def main(args) -> int:
    from neuralmind import load_settings
    settings = load_settings(args.config)
    msettings = settings.section("memory", MemorySettings)
    modes = [m.strip() for m in args.mode.split(",") if m.strip()]
    if not modes or set(modes) - set(MODES):
        print(f"neuralmind: --mode takes a comma-separated subset of {', '.join(MODES)}",
              file=sys.stderr)
        return 2
    root = Path(args.dataset).expanduser().resolve()
    if not root.is_dir():
        print(f"neuralmind: no dataset folder {root}", file=sys.stderr)
        return 2
    work = Path(args.work) if args.work else Path(tempfile.gettempdir()) / (
        "neuralmind-eval-memory/" + root.name + "-" + hashlib.sha1(str(root).encode()).hexdigest()[:8])
    try:
        collections = load(root, args.split)
    except OSError as ex:  # a split it does not hold, most often: the file is named
        print(f"neuralmind: cannot read the dataset: {ex.filename or root}: "
              f"{(ex.strerror or str(ex)).lower()} (--split {args.split})", file=sys.stderr)
        return 2
    except BadDataset as ex:  # not JSON, not the layout's shape, no query with a gold answer
        print(f"neuralmind: {ex}", file=sys.stderr)
        return 2
    if args.limit_queries:
        for col in collections:
            col.queries = col.queries[: args.limit_queries]
    negatives = {}
    for other in args.negatives:
        folder = Path(other).expanduser().resolve()
        if not folder.is_dir():
            print(f"neuralmind: no dataset folder {folder} (--negatives)", file=sys.stderr)
            return 2
        try:
            negatives[folder.name] = load_queries(folder, args.split)[: args.limit_queries]
        except OSError as ex:
            print(f"neuralmind: cannot read the --negatives dataset: {ex.filename or folder}: "
                  f"{(ex.strerror or str(ex)).lower()}", file=sys.stderr)
            return 2
        except BadDataset as ex:
            print(f"neuralmind: {ex} (--negatives)", file=sys.stderr)
            return 2
    folds = None
    if args.folds:
        try:
            folds = Folds(Path(args.folds).expanduser())
        except BadDataset as ex:
            print(f"neuralmind: {ex} (--folds)", file=sys.stderr)
            return 2
    in_sample = (msettings.rerank and "hybrid" in modes and folds is None
                 and digest(collections) in {t.get("digest") for t in
                                             shipped().spec.get("trained_on", [])})
    semantic = bool(set(modes) - {"keyword"} or args.fusion)
    dsn = None
    if args.backend == "postgres":
        dsn = args.dsn or settings.storage.dsn
        if not dsn:
            print("neuralmind: --backend postgres needs a database: --dsn "
                  "postgresql://user:password@host:5432/db (or [storage] dsn in --config, or "
                  "$NEURALMIND_DATABASE_URL); its memory tables get one project per eval store",
                  file=sys.stderr)
            return 2
        if why := unreachable(dsn):
            print(f"neuralmind: {why}", file=sys.stderr)
            return 2
    kernel = eval_kernel(work, args.config, dsn)
    started = time.monotonic()
    try:
        result = evaluate(collections, modes, msettings, args.fusion, work, kernel, semantic,
                          negatives, folds, decay=not args.no_decay)
    finally:
        kernel.shutdown()
    result["seconds"] = round(time.monotonic() - started, 1)
    result["dataset"] = root.name
    result["settings"] = {k: getattr(msettings, k) for k in SHOWN}
    result["ranker"] = ("out-of-fold" if folds else "in-sample" if in_sample else "shipped")
    if folds is not None and folds.unseen:
        result["ranker_unseen_queries"] = folds.unseen
    result["decay"] = not args.no_decay
    result["backend"] = args.backend
    if semantic:
        result["model_id"] = kernel.embedder.model_id
    names = [*modes, *(variant(v, msettings)[0] for v in args.fusion)]
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{root.name}: {result['queries']} queries, {sum(len(c.docs) for c in collections)} "
              f"records in {len(collections)} store(s); decay {'on' if result['decay'] else 'off'}"
              f"; store {work if dsn is None else 'postgres'}")
        print("settings: " + ", ".join(f"{k} {v}" for k, v in result["settings"].items())
              + f"; ranker {result['ranker']}")
        print(table(result, names))
        if "floor_recall_lost" in result:
            print("floor      own recall@10 lost: " + ", ".join(
                f"{m} {v:.4f}" for m, v in result["floor_recall_lost"].items()))
        if "negatives" in result:
            neg = result["negatives"]
            print(f"negatives  {sum(neg['queries'].values())} cross-set queries answered with "
                  "nothing: " + ", ".join(f"{m} {v:.3f}" for m, v in neg["empty"].items()))
            for name, shares in neg["by_set"].items():
                print(f"  {name}→{root.name} ({neg['queries'][name]}): "
                      + ", ".join(f"{m} {v:.3f}" for m, v in shares.items()))
        if in_sample:
            print("note: the shipped ranker was trained on these queries, so the hybrid figure "
                  "is in-sample; pass --folds bench/data/ranker_folds.json for the out-of-fold "
                  "figure", file=sys.stderr)
        print(f"mean leg time per query: keyword {result['leg_ms']['keyword']} ms, semantic "
              f"{result['leg_ms']['semantic']} ms (in-process); {result['seconds']} s in all")
    return 0
