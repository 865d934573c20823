"""``neuralmind audit verify`` against every kind of tampering, each on a copy of a real trail
made by the busy 4-worker server: it exits 1 and names the first record that breaks."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from plugins.tier2_bridge.audit import chain_hash
from tests.plugins.tier2_bridge.helpers import audit_cli, audit_rows, copy_db, in_process, verify

SHIFT = 1_000_000  # moves seqs out of the way, since seq is the primary key


def rehash(conn: sqlite3.Connection, start: int) -> None:
    """What a careful forger does: recompute every hash from ``start`` on."""
    rows = [dict(r) for r in conn.execute("SELECT * FROM audit WHERE seq >= ? ORDER BY seq",
                                          (start,))]
    prev = conn.execute("SELECT hash FROM audit WHERE seq = ?", (start - 1,)).fetchone()[0]
    for row in rows:
        digest = chain_hash(prev, row)
        conn.execute("UPDATE audit SET prev_hash = ?, hash = ? WHERE seq = ?",
                     (prev, digest, row["seq"]))
        prev = digest


def edit(conn):
    conn.execute("UPDATE audit SET actor = 'mallory' WHERE seq = 5")


def blob(conn):  # a field's type changed: its hash cannot even be computed
    conn.execute("UPDATE audit SET actor = X'ff00' WHERE seq = 5")


def not_utf8(conn):
    conn.execute("UPDATE audit SET actor = CAST(X'ff41' AS TEXT) WHERE seq = 7")


def a_number(conn):
    conn.execute("UPDATE audit SET target = 42 WHERE seq = 9")


def edit_time(conn):
    conn.execute("UPDATE audit SET at = '2000-01-01T00:00:00.000Z' WHERE seq = 40")


def forged_edit(conn):  # the edited record's own hash recomputed: its successor no longer links
    edit(conn)
    row = dict(conn.execute("SELECT * FROM audit WHERE seq = 5").fetchone())
    conn.execute("UPDATE audit SET hash = ? WHERE seq = 5", (chain_hash(row["prev_hash"], row),))


def delete(conn):
    conn.execute("DELETE FROM audit WHERE seq = 5")


def delete_first(conn):
    conn.execute("DELETE FROM audit WHERE seq = 1")


def delete_and_renumber(conn):
    conn.execute("DELETE FROM audit WHERE seq = 5")
    conn.execute("UPDATE audit SET seq = seq + ? WHERE seq > 5", (SHIFT,))
    conn.execute("UPDATE audit SET seq = seq - ? - 1 WHERE seq > ?", (SHIFT, SHIFT))


def insert(conn):  # a well-formed record slipped in at 5, later records moved up by one
    conn.execute("UPDATE audit SET seq = seq + ? WHERE seq >= 5", (SHIFT,))
    conn.execute("UPDATE audit SET seq = seq - ? + 1 WHERE seq > ?", (SHIFT, SHIFT))
    prev = conn.execute("SELECT hash FROM audit WHERE seq = 4").fetchone()[0]
    rec = {"seq": 5, "at": "2030-01-01T00:00:00.000Z", "actor": "mallory",
           "action": "project.removed", "project": "p_x", "target": None, "request_id": "r"}
    conn.execute("INSERT INTO audit VALUES (:seq, :at, :actor, :action, :project, :target, "
                 ":request_id, :prev_hash, :hash)",
                 {**rec, "prev_hash": prev, "hash": chain_hash(prev, rec)})


def append_bogus(conn):
    head = conn.execute("SELECT MAX(seq), hash FROM audit").fetchone()
    conn.execute("INSERT INTO audit VALUES (?, '2030-01-01T00:00:00.000Z', 'mallory', 'api.call',"
                 " NULL, NULL, NULL, ?, ?)", (head[0] + 1, head[1], "f" * 64))


def reorder(conn):  # records 3 and 4 swap places
    conn.execute("UPDATE audit SET seq = ? WHERE seq = 3", (SHIFT,))
    conn.execute("UPDATE audit SET seq = 3 WHERE seq = 4")
    conn.execute("UPDATE audit SET seq = 4 WHERE seq = ?", (SHIFT,))


def tamper(busy, tmp_path: Path, how) -> Path:
    home = tmp_path / "copy"
    copy_db(busy.home / "audit.db", home / "audit.db")
    conn = sqlite3.connect(home / "audit.db", isolation_level=None)
    conn.row_factory = sqlite3.Row
    try:
        conn.execute("DROP TRIGGER audit_no_update")  # an attacker with the file can do this
        conn.execute("DROP TRIGGER audit_no_delete")
        how(conn)
    finally:
        conn.close()
    return home


@pytest.mark.parametrize("how, broken", [
    (edit, 5), (edit_time, 40), (forged_edit, 6), (delete, 5), (delete_first, 1),
    (delete_and_renumber, 5), (insert, 6), (reorder, 3), (blob, 5), (not_utf8, 7),
    (a_number, 9)])
def test_verify_names_the_first_broken_record(busy, tmp_path, how, broken):
    home = tamper(busy, tmp_path, how)
    code, verdict = verify(home)
    assert code == 1
    assert verdict["whole"] is False
    assert verdict["broken"]["seq"] == broken, verdict
    assert verdict["records"] == broken - 1


def test_append_at_the_end_is_caught(busy, tmp_path):
    home = tamper(busy, tmp_path, append_bogus)
    code, verdict = verify(home)
    assert (code, verdict["broken"]["seq"]) == (1, len(audit_rows(busy.home)) + 1)


def test_an_anchor_catches_a_cut_tail_and_a_rewritten_chain(busy, tmp_path):
    code, head = verify(busy.home)
    assert code == 0
    anchor = f"{head['head_seq']}:{head['head_hash']}"

    def cut(conn):
        conn.execute("DELETE FROM audit WHERE seq > 100")

    home = tamper(busy, tmp_path / "cut", cut)
    assert verify(home)[0] == 0  # a chain alone cannot see its missing end …
    code, verdict = verify(home, "--anchor", anchor)
    assert (code, verdict["broken"]["seq"]) == (1, 101)  # … the saved head can

    def rewrite(conn):
        edit(conn)
        rehash(conn, 5)

    home = tamper(busy, tmp_path / "rewrite", rewrite)
    assert verify(home)[0] == 0
    code, verdict = verify(home, "--anchor", anchor)
    assert (code, verdict["broken"]["seq"]) == (1, head["head_seq"])


def test_verify_speaks_plainly(busy, tmp_path):
    done = audit_cli(busy.home, "verify", "--home", str(busy.home))
    assert done.returncode == 0 and done.stdout.startswith("audit trail whole:")
    home = tamper(busy, tmp_path, edit)
    done = audit_cli(home, "verify", "--home", str(home))
    assert done.returncode == 1
    assert "BROKEN at record 5" in done.stdout and "edited" in done.stdout
    for bad in ("nonsense", f"0:{'a' * 64}", f"13:{'z' * 64}", f"١٣:{'a' * 64}",
                f"13:{'a' * 63}"):
        code, _, err = in_process("audit", "verify", "--home", str(home), "--anchor", bad)
        assert code == 2 and "expected SEQ:HASH" in err, bad
    (tmp_path / "nowhere").mkdir()  # a home without a trail
    code, _, err = in_process("audit", "verify", "--home", str(tmp_path / "nowhere"))
    assert code == 1 and "no audit trail" in err
    code, out, _ = in_process("audit", "verify", "--home", str(tmp_path / "nowhere"), "--json")
    verdict = json.loads(out)  # a script reads a verdict on stdout either way
    assert code == 1 and verdict["whole"] is False and "no audit trail" in verdict["error"]


def test_the_broken_line_sends_no_control_character_to_the_terminal(busy, tmp_path):
    home = tamper(busy, tmp_path / "trail\x1b]0;owned\x07", edit)
    code, out, _ = in_process("audit", "verify", "--home", str(home))
    assert code == 1 and out.startswith("audit trail BROKEN at record 5: ")
    assert "trail\\x1b]0;owned\\x07/copy" in out and "\x1b" not in out, out


def test_a_field_that_is_not_text_is_named_not_a_traceback(busy, tmp_path):
    home = tamper(busy, tmp_path, blob)
    done = audit_cli(home, "verify", "--home", str(home))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stdout.startswith("audit trail BROKEN at record 5: its actor holds bytes that "
                                  "are not UTF-8 text: it was edited")
    kept = tmp_path / "kept.jsonl"
    kept.write_text("precious\n")
    done = audit_cli(home, "export", "--home", str(home), "--out", str(kept))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "record 5 cannot be exported: its actor holds bytes" in done.stderr
    assert kept.read_text() == "precious\n"  # what the file held is left as it was
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".kept")] == []


@pytest.mark.parametrize("args, says", [
    (("verify", "--home", "/nonexistent"), "--home '/nonexistent': no such directory"),
    (("verify", "--home", ""), "--home '': no such directory"),
    (("export", "--out", "/nonexistent/a.jsonl"), "--out /nonexistent/a.jsonl: no folder "
                                                  "/nonexistent to write it in"),
    (("export", "--out", "/tmp"), "--out '/tmp': a directory; name a file"),
])
def test_a_wrong_home_or_out_is_named_before_any_file_is_opened(busy, tmp_path, args, says):
    home = ("--home", str(busy.home)) if "--home" not in args else ()
    code, out, err = in_process("audit", *args, *home)
    assert (code, out) == (2, "") and err == f"neuralmind: {says}\n"
