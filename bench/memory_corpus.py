"""Real-text memories at any size, for the scale figures of ``bench/memory.py``.

The text is the eval corpora's (``../shared/eval``: SciFact abstracts, LoCoMo dialogue turns,
CoSQA functions), cut into *units* (a SciFact title or sentence, a LoCoMo turn, a CoSQA
function's first 400 characters). Record ``i`` is drawn with its own seed: a title from one
source and a rationale of 2–5 consecutive units of it, plus one unit of another source (so no
two records are alike and every word keeps its real frequency). Its vector, for sizes too
large to embed here (~80 records/s on these two cores), is the normalised sum of its units'
real embeddings — each unit is embedded once by the packaged model (cached in ``--cache``),
so the vectors lie where real text lies, in clusters, which is what an ANN index's recall
depends on. Half the records come from SciFact, 30% from LoCoMo, 20% from CoSQA; every one
carries the evidence line ``SHARED`` (the worst case's words). Queries are the sets' own:
SciFact claims, LoCoMo questions, CoSQA queries.

    python bench/memory_corpus.py --cache /tmp/nm-scale-cache   # embed the units once
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
KINDS, SHARES = ("scifact", "locomo", "cosqa"), (0.5, 0.3, 0.2)  # of the records' sources
# every record's evidence: the words of the worst case, a query whose words all records hold
SHARED = "measured on the shared evaluation corpus"
PASSAGE_MIN = 1_000
SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(])")


def eval_root() -> Path:
    """The eval corpora, by the benches' one rule (bench/common.py), or a one-line exit."""
    from bench.common import eval_dir
    if (root := eval_dir()).is_dir():
        return root
    raise SystemExit(f"bench: {root} (the eval corpora) is not here: set NEURALMIND_EVAL_DIR")


@dataclass
class Source:
    """One document: a title and its units (the texts embedded once each)."""

    title: str
    units: list[int]  # indices into Corpus.units (the body's)
    title_unit: int | None = None  # the title's own unit, when it is one


class Corpus:
    def __init__(self, root: Path | None = None):
        root = root or eval_root()
        self.units: list[str] = []
        self.sources: dict[str, list[Source]] = {"scifact": [], "locomo": [], "cosqa": []}
        self.queries: list[str] = []
        self._scifact(root / "scifact")
        self._locomo(root / "locomo")
        self._cosqa(root / "cosqa")

    def _unit(self, text: str) -> int:
        self.units.append(text)
        return len(self.units) - 1

    def _scifact(self, root: Path) -> None:
        with open(root / "corpus.jsonl", encoding="utf-8") as fh:
            for line in fh:
                d = json.loads(line)
                sentences = [s.strip() for s in SENTENCE.split(d.get("text") or "") if s.strip()]
                if d.get("title") and sentences:
                    title = self._unit(d["title"])
                    self.sources["scifact"].append(Source(d["title"][:300], [
                        self._unit(s) for s in sentences], title))
        with open(root / "queries.jsonl", encoding="utf-8") as fh:
            self.queries += [json.loads(line)["text"] for line in fh]

    def _locomo(self, root: Path) -> None:
        for path in sorted(root.glob("*.json")):
            for conv in json.loads(path.read_text(encoding="utf-8")):
                c = conv["conversation"]
                for key, turns in c.items():
                    if key.startswith("session_") and isinstance(turns, list) and turns:
                        date = c.get(f"{key}_date_time", "")
                        units = [self._unit(f"{t['speaker']}: {t.get('text') or '-'}")
                                 for t in turns]
                        for at in range(0, len(units), 6):  # a few turns of one session
                            self.sources["locomo"].append(Source(f"{turns[at]['speaker']} on {date}",
                                                       units[at:at + 6]))
                self.queries += [qa["question"] for qa in conv["qa"] if "question" in qa]

    def _cosqa(self, root: Path) -> None:
        codes = json.loads((root / "code_idx_map.txt").read_text(encoding="utf-8"))
        for code in codes:
            first = code.strip().splitlines()[0] if code.strip() else "def f()"
            self.sources["cosqa"].append(Source(first[:300], [self._unit(code[:400])]))
        dev = json.loads((root / "cosqa-retrieval-dev-500.json").read_text(encoding="utf-8"))
        self.queries += [q["doc"] for q in dev]

    def digest(self) -> str:
        return hashlib.sha1("\0".join(self.units).encode()).hexdigest()[:16]

    # -- records ---------------------------------------------------------------------------

    def record(self, i: int) -> tuple[dict, list[int]]:
        """Record ``i`` (the same on every run) and the units its text is made of."""
        rng = random.Random(i * 7919 + 17)
        src, other = (rng.choice(self.sources[rng.choices(KINDS, SHARES)[0]]) for _ in range(2))
        span = rng.randint(2, 5)
        start = rng.randrange(max(1, len(src.units) - span + 1))
        units = src.units[start:start + span] + [rng.choice(other.units)]
        # under passage_min_chars, so the backfill finds nothing to add to the given vector
        rationale = " ".join(self.units[u] for u in units)[:PASSAGE_MIN]
        rec = {"title": src.title, "rationale": rationale,
               "files_affected": [f"src/m{rng.randrange(500)}.py"],
               "tags": [f"t{rng.randrange(50)}"], "evidence": [SHARED]}
        return rec, ([] if src.title_unit is None else [src.title_unit]) + units

    def vector(self, vectors: np.ndarray, units: list[int]) -> np.ndarray:
        v = vectors[units].sum(axis=0)
        return (v / np.linalg.norm(v)).astype(np.float32)


def unit_vectors(corpus: Corpus, cache: Path, embedder, log=print) -> np.ndarray:
    """Every unit's vector from ``embedder``, cached per corpus and model."""
    cache.mkdir(parents=True, exist_ok=True)
    slug = re.sub(r"[^A-Za-z0-9_.-]", "_", embedder.model_id)
    path = cache / f"units-{corpus.digest()}-{slug}.npy"
    if path.exists():
        return np.load(path, mmap_mode="r")
    part = path.with_suffix(".partial.npy")
    out = np.zeros((len(corpus.units), embedder.dim), np.float32)
    done = 0
    if part.exists():
        saved = np.load(part)
        done = int((np.abs(saved).sum(axis=1) > 0).argmin()) if (np.abs(saved).sum(axis=1) == 0).any() \
            else len(saved)
        out[:done] = saved[:done]
    order = list(range(len(corpus.units)))
    started = time.perf_counter()
    for at in range(done, len(order), 512):
        chunk = order[at:at + 512]
        out[chunk] = embedder.embed([corpus.units[u] for u in chunk])
        np.save(part, out)
        rate = (at + len(chunk) - done) / (time.perf_counter() - started)
        log(f"units embedded: {at + len(chunk)}/{len(order)} ({rate:.0f}/s)")
    np.save(path, out)
    part.unlink()
    return np.load(path, mmap_mode="r")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default="/tmp/nm-scale-cache")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from kernel.config import load_settings
    from kernel.embeddings import default_embedder
    corpus = Corpus()
    print(f"{len(corpus.units)} units, {sum(map(len, corpus.sources.values()))} sources, {len(corpus.queries)} queries")
    unit_vectors(corpus, Path(args.cache), default_embedder(load_settings()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
