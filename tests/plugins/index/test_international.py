"""Code in other scripts than ASCII's: identifiers in Chinese or German, a Japanese README,
folders named in NFD as macOS names them, Hindi, whose words hold combining marks. The keyword
leg and the exact-name lookup took words as ``[A-Za-z0-9]+`` (``données`` was searched as
``donn OR es``, ``计算税额`` not at all; later ``हिन्दी`` as ``ह OR न OR द``), and a path typed
in NFC missed the NFD file the index holds."""

from __future__ import annotations

import sqlite3
import unicodedata
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.plugins.index.conftest import build
from tests.support import LocalServer


def nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


RESEAU = f"{nfd('données')}/{nfd('réseau')}.py"  # as on disk: written from a Mac
FILES = {
    "计算/税率.py": '''"""税率计算模块：根据收入计算个人所得税。"""


def 计算税额(收入: float) -> float:
    """根据收入计算应缴税额。"""
    return 收入 * 税率()


def 税率() -> float:
    # 当前税率为百分之二十
    return 0.2
''',
    RESEAU: '''"""Gestion du réseau et des données."""
from 计算.税率 import 计算税额


def envoyer_données(paquet):
    """Envoie les données sur le réseau."""
    return 计算税额(len(paquet))
''',
    "modèles/größe.py": '''class Größenrechner:
    """Berechnet die Größe der Übertragung."""

    def berechne(self, straße: str) -> int:
        return len(straße)
''',
    "README.md": "# 税务系统\n\n这是一个计算个人所得税的系统。ネットワーク処理も含む。\n",
    "संधि.py": '''def संधि_नियम(शब्द: str) -> str:
    """हिन्दी व्याकरण के संधि नियम लागू करता है।"""
    return शब्द
''',
}


def write(root: Path) -> Path:
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def repo(server, tmp_path_factory):
    pid = server.register(write(tmp_path_factory.mktemp("intl") / "repo"))
    build(server, pid)
    return pid


def search(server, pid: str, query: str, mode: str = "keyword") -> list[tuple[str, str]]:
    r = server.post(f"/v1/projects/{pid}/search", {"query": query, "mode": mode, "n": 5})
    assert r.status == 200, r.body
    return [(h["label"], h["source_file"]) for h in r.json["results"]]


@pytest.mark.parametrize("query, first", [
    ("计算税额", ("计算税额", "计算/税率.py")),
    ("Größenrechner", ("Größenrechner", "modèles/größe.py")),
    ("größenrechner", ("Größenrechner", "modèles/größe.py")),
])
def test_keyword_search_puts_a_name_in_any_script_first(server, repo, query, first):
    assert search(server, repo, query)[0] == first


@pytest.mark.parametrize("query, path", [
    ("税率", "计算/税率.py"),  # a word inside a name and a sentence
    ("所得税", "计算/税率.py"),
    ("réseau", RESEAU),
    (nfd("réseau"), RESEAU),  # typed on a Mac
    ("données", RESEAU),
    ("ネットワーク処理", "README.md"),
    ("统", "README.md"),  # one character, ending its runs (系统) as a prefix finds them
    ("व्याकरण", "संधि.py"),  # vowel signs and viramas are marks inside the word, not breaks
    ("हिन्दी नियम", "संधि.py"),
])
def test_keyword_search_finds_words_of_any_script(server, repo, query, path):
    assert path in {p for _, p in search(server, repo, query)}


def test_a_chinese_query_is_the_phrase_of_its_pairs_not_any_of_them(server, repo):
    """``税额计算`` shares the pairs 税额 and 计算 with the docstring ``…计算应缴税额`` but is
    not in it: an OR of pairs would find it."""
    assert search(server, repo, "税额计算") == []
    assert search(server, repo, "应缴税额")[0][0] == "计算税额"


def test_hybrid_ranks_the_definition_a_chinese_name_names_first(server, repo):
    """The README and the module outscored the function on the model alone."""
    assert search(server, repo, "计算税额", "hybrid")[0] == ("计算税额", "计算/税率.py")


@pytest.mark.parametrize("typed, on_disk", [
    ("données/réseau.py", RESEAU),  # NFC for a file macOS wrote in NFD
    (nfd("modèles/größe.py"), "modèles/größe.py"),  # and the other way round
])
def test_a_path_in_either_normalisation_form_names_the_file_as_on_disk(server, repo, typed,
                                                                      on_disk):
    base = f"/v1/projects/{repo}"
    doc = server.get(f"{base}/documents?path={quote(typed)}")
    assert doc.status == 200, doc.body
    assert doc.json["path"] == on_disk and doc.json["nodes"]
    impact = server.post(f"{base}/impact", {"files": [typed]})
    assert impact.status == 200, impact.body
    assert {n["path"] for n in impact.json["changed"]} == {on_disk}
    neighbours = server.get(f"{base}/neighbors/structural?file={quote(typed)}")
    assert neighbours.status == 200 and neighbours.json["file"] == on_disk, neighbours.body
    activity = server.post(f"{base}/activity", {"files": [typed], "kind": "edit"}).json
    assert (activity["files"], activity["not_indexed"]) == (1, [])
    assert server.post(f"{base}/next", {"files_open": [typed]}).json["files_open"] == [on_disk]


def test_an_index_of_the_earlier_keyword_form_is_rekeyed_when_opened(tmp_path):
    """An index written before the keyword text took NFKC and character pairs holds whole
    Chinese runs, which no query finds now, and no NFC key for its paths: opening it derives
    its keyword rows again and keys its paths."""
    root = write(tmp_path / "repo")
    with LocalServer(tmp_path / "home", plugins=["auth", "index"]) as server:
        pid = server.register(root)
        build(server, pid)
    [index] = [p for p in tmp_path.rglob("index.db")]
    with sqlite3.connect(index) as conn:  # the rows as the release before wrote them
        conn.executescript("DELETE FROM nodes_fts; INSERT INTO nodes_fts (rowid, label, body) "
                           "SELECT nid, qualname || ' ' || signature, docstring || char(10) "
                           "|| text FROM nodes; DROP INDEX files_by_nfc_path; "
                           "ALTER TABLE files DROP COLUMN nfc_path; PRAGMA user_version = 5;")
    conn.close()
    with LocalServer(tmp_path / "home", plugins=["auth", "index"]) as server:
        # not a name: the keyword rows alone answer it
        assert ("计算.税率", "计算/税率.py") in search(server, pid, "所得税")
        typed = quote("données/réseau.py")  # NFC, for the file macOS wrote in NFD
        doc = server.get(f"/v1/projects/{pid}/documents?path={typed}")
        assert doc.status == 200 and doc.json["path"] == RESEAU, doc.body
