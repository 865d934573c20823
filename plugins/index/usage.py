"""A project's ``<state_dir>/usage.db``: learned links between files (synapses), recent
activations (files read, edited, tested, searched together) and the tokens that ``query``
and ``search`` served against the files they came from. Every worker reads and writes the
same file, so what one worker learns the others use. Only SQL lives here; the rules are in
``learning.py``.

A synapse is one row per pair of files ``(a, b)``, ``a < b``, with the weight it had at
``updated`` (epoch seconds); its weight at any later time decays by half every half-life,
computed when it is read or next written, never by a background sweep."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from plugins.index.store import Derived

MIGRATIONS = Derived(["""
CREATE TABLE synapses (
    a TEXT NOT NULL,
    b TEXT NOT NULL,
    weight REAL NOT NULL,
    updated REAL NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (a, b)
) WITHOUT ROWID;
CREATE INDEX synapses_by_b ON synapses (b);
CREATE TABLE activations (
    id INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    kind TEXT NOT NULL,
    session TEXT NOT NULL,
    files TEXT NOT NULL
);
CREATE INDEX activations_by_at ON activations (at);
CREATE TABLE savings (
    day TEXT NOT NULL,
    kind TEXT NOT NULL,
    calls INTEGER NOT NULL,
    served INTEGER NOT NULL,
    whole INTEGER NOT NULL,
    PRIMARY KEY (day, kind)
);
CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""])

# the weight of a synapse row at :now, decayed by half every :half seconds
DECAYED = "weight * pow(0.5, max(0.0, :now - updated) / :half)"


def ordered(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a < b else (b, a)


class UsageStore:
    def __init__(self, db):
        self.db = db

    # -- writes (each call is one transaction) ------------------------------------------------

    def write(self, activations: list[tuple[float, str, str, list[str]]],
              strengthen: list[tuple[str, str, float, float]],
              weaken: list[tuple[str, str, float, float]],
              savings: dict[tuple[str, str], list[int]], counters: dict[str, int],
              half_life_s: float) -> None:
        """Record activations ``(at, kind, session, files)``; strengthen pairs ``(a, b,
        rate, at)`` Hebbian-wise, ``w ← d + rate · (1 − d)`` with ``d`` the decayed weight;
        weaken pairs, ``w ← d · (1 − rate)``; add savings ``{(day, kind): [calls, served,
        whole]}`` and counters."""
        with self.db.transaction() as conn:
            conn.executemany("INSERT INTO activations (at, kind, session, files) VALUES "
                             "(?, ?, ?, ?)", [(at, kind, session, json.dumps(files))
                                              for at, kind, session, files in activations])
            conn.executemany(
                "INSERT INTO synapses (a, b, weight, updated, count) VALUES "
                "(:a, :b, :rate, :now, 1) ON CONFLICT (a, b) DO UPDATE SET "
                f"weight = {DECAYED} + excluded.weight * (1 - {DECAYED}), "
                "updated = max(updated, excluded.updated), count = count + 1",
                [{"a": a, "b": b, "rate": rate, "now": at, "half": half_life_s}
                 for a, b, rate, at in strengthen])
            conn.executemany(
                f"UPDATE synapses SET weight = {DECAYED} * (1 - :rate), "
                "updated = max(updated, :now) WHERE a = :a AND b = :b",
                [{"a": a, "b": b, "rate": rate, "now": at, "half": half_life_s}
                 for a, b, rate, at in weaken])
            conn.executemany(
                "INSERT INTO savings (day, kind, calls, served, whole) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (day, kind) DO UPDATE SET calls = calls + excluded.calls, "
                "served = served + excluded.served, whole = whole + excluded.whole",
                [(day, kind, *v) for (day, kind), v in savings.items()])
            conn.executemany(
                "INSERT INTO counters (name, value) VALUES (?, ?) ON CONFLICT (name) "
                "DO UPDATE SET value = value + excluded.value", list(counters.items()))

    def prune(self, now: float, half_life_s: float, floor: float, keep_s: float) -> dict[str, int]:
        """Drop synapses decayed below ``floor`` and activations older than ``keep_s``."""
        with self.db.transaction() as conn:
            gone = conn.execute(f"DELETE FROM synapses WHERE {DECAYED} < :floor",
                                {"now": now, "half": half_life_s, "floor": floor}).rowcount
            old = conn.execute("DELETE FROM activations WHERE at < ?", (now - keep_s,)).rowcount
        return {"synapses": gone, "activations": old}

    def forget(self, paths: Iterable[str]) -> int:
        """Drop every synapse touching ``paths`` (files no longer in the project)."""
        paths = list(paths)
        if not paths:
            return 0
        with self.db.transaction() as conn:
            conn.execute("CREATE TEMP TABLE IF NOT EXISTS gone (path TEXT PRIMARY KEY)")
            conn.execute("DELETE FROM gone")
            conn.executemany("INSERT OR IGNORE INTO gone VALUES (?)", [(p,) for p in paths])
            return conn.execute("DELETE FROM synapses WHERE a IN gone OR b IN gone").rowcount

    # -- reads --------------------------------------------------------------------------------

    def recent(self, since: float, session: str | None = None, containing: str | None = None,
               limit: int = 200) -> list[dict[str, Any]]:
        """Activations since ``since``, newest first (of one session; holding one file)."""
        sql, args = "SELECT at, kind, session, files FROM activations WHERE at >= ?", [since]
        if session is not None:
            sql += " AND session = ?"
            args.append(session)
        if containing is not None:
            sql += " AND instr(files, ?) > 0"
            args.append(json.dumps(containing))
        rows = self.db.conn.execute(sql + " ORDER BY at DESC, id DESC LIMIT ?",
                                    [*args, limit]).fetchall()
        return [{"at": r[0], "kind": r[1], "session": r[2], "files": json.loads(r[3])}
                for r in rows]

    def linked(self, paths: Iterable[str], now: float, half_life_s: float, floor: float,
               limit: int) -> list[tuple[str, str, float, int, float]]:
        """``(path, other, decayed weight, count, updated)`` of the synapses of ``paths``,
        strongest first."""
        paths = list(paths)
        if not paths:
            return []
        names = {f"p{i}": p for i, p in enumerate(paths)}
        marks = ",".join(f":{n}" for n in names)
        rows = self.db.conn.execute(
            f"SELECT a, b, {DECAYED} AS w, count, updated FROM synapses "
            f"WHERE a IN ({marks}) OR b IN ({marks})",
            {**names, "now": now, "half": half_life_s}).fetchall()
        wanted = set(paths)
        out = []
        for a, b, w, count, updated in rows:
            if w < floor:
                continue
            if a in wanted:
                out.append((a, b, w, count, updated))
            if b in wanted:
                out.append((b, a, w, count, updated))
        out.sort(key=lambda r: -r[2])
        return out[:limit]

    def stats(self, now: float, half_life_s: float, since: float, top: int) -> dict[str, Any]:
        conn = self.db.conn
        params = {"now": now, "half": half_life_s}
        total, files, mean = conn.execute(
            f"SELECT COUNT(*), (SELECT COUNT(*) FROM (SELECT a FROM synapses UNION "
            f"SELECT b FROM synapses)), AVG({DECAYED}) FROM synapses", params).fetchone()
        strongest = conn.execute(
            f"SELECT a, b, {DECAYED} AS w, count, updated FROM synapses ORDER BY w DESC LIMIT "
            ":top", {**params, "top": top}).fetchall()
        kinds = {r[0]: r[1] for r in conn.execute(
            "SELECT kind, COUNT(*) FROM activations WHERE at >= ? GROUP BY kind", (since,))}
        counters = {r[0]: r[1] for r in conn.execute("SELECT name, value FROM counters")}
        return {"synapses": total, "files": files, "mean_weight": mean or 0.0,
                "strongest": [tuple(r) for r in strongest], "activations": kinds,
                "counters": counters}

    def savings(self, since_day: str) -> list[tuple[str, str, int, int, int]]:
        return [tuple(r) for r in self.db.conn.execute(
            "SELECT day, kind, calls, served, whole FROM savings WHERE day >= ? "
            "ORDER BY day, kind", (since_day,))]

    def savings_total(self) -> list[tuple[str, int, int, int]]:
        return [tuple(r) for r in self.db.conn.execute(
            "SELECT kind, SUM(calls), SUM(served), SUM(whole) FROM savings GROUP BY kind")]

    def synapse_files(self) -> set[str]:
        return {r[0] for r in self.db.conn.execute("SELECT a FROM synapses UNION "
                                                   "SELECT b FROM synapses")}

    def integrity(self) -> str:
        return self.db.conn.execute("PRAGMA quick_check").fetchone()[0]
