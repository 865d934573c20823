"""Records in other languages and scripts, through HTTP on both backends: Chinese and Japanese
words inside sentences, non-ASCII list fields, Unicode punctuation and accents in the keyword
score, one folding on SQLite and PostgreSQL, NFC names, queries the packaged English model
cannot read, duplicate hints — and a database of the release before, migrated."""

from __future__ import annotations

import json
import unicodedata
from urllib.parse import urlencode

import pytest

from tests.plugins.memory.conftest import Api

ZH = ("使用数据库连接池提高性能", "我们决定在所有服务中使用连接池，因为数据库连接的建立非常耗时。")
JA = ("キャッシュにはRedisを使う", "セッション情報はRedisに保存することに決めました。")


def nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


def titles(result) -> list[str]:
    return [r["title"] for r in result["results"]]


@pytest.fixture(scope="module")
def world(server, tmp_path_factory) -> tuple[Api, dict[str, str]]:
    """A project of records in seven scripts, embedded."""
    api = Api(server, tmp_path_factory.mktemp("intl"))
    made = {
        "zh": api.create(title=ZH[0], rationale=ZH[1]),
        "ja": api.create(title=JA[0], rationale=JA[1]),
        "ru": api.create(title="Config format is TOML", rationale="We use TOML.",
                         evidence=["бенчмарк показал ускорение парсинга", "Müller approved"],
                         tags=["конфигурация"]),
        "kafka": api.create(title="Очередь сообщений", rationale="Берём «Kafka», а не RabbitMQ."),
        "de": api.create(title="Straße der Größenordnung: Überprüfung",
                         rationale="Die Übersetzung läuft über das Café-Modul."),
        "tr": api.create(title="İstanbul veri merkezi kullanılacak", rationale="DİSK ŞİFRELEME."),
        "fr": api.create(title=nfd("Gestion des données réseau"), rationale="Stratégie."),
        "en": api.create(title="Logs are emitted as JSON", rationale="Central collection."),
    }
    api.embedded()
    return api, {k: rec["id"] for k, rec in made.items()}


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
@pytest.mark.parametrize("query,key", [("数据库", "zh"), ("连接池", "zh"), ("Redis", "ja"),
                                       ("キャッシュ", "ja"),
                                       # one character inside a run, and ending one
                                       ("池", "zh"), ("能", "zh")])
def test_a_chinese_or_japanese_word_inside_a_sentence_is_found(world, query, key, mode):
    api, ids = world
    found = api.search(query, mode=mode)["results"]
    assert [r["id"] for r in found] == [ids[key]]


def test_a_run_of_characters_is_a_phrase_not_any_of_its_pairs(world):
    api, _ = world
    # 数据 and 库连 are both in the record; 数据库连接池 is, 数据连 is not
    assert titles(api.search("数据库连接池", mode="keyword")) == [ZH[0]]
    assert api.search("数据连", mode="keyword")["results"] == []


@pytest.mark.parametrize("query", ["показал", "конфигурация", "Müller"])
def test_non_ascii_list_fields_are_indexed_as_words(world, query):
    api, ids = world
    assert [r["id"] for r in api.search(query, mode="keyword")["results"]] == [ids["ru"]]


def test_no_json_escape_is_indexed(world):
    api, _ = world
    assert api.search("u043a", mode="keyword")["results"] == []


@pytest.mark.parametrize("query,key", [("Kafka", "kafka"), ("cafe", "de"), ("Cafe-Modul", "de"),
                                       ("Uberprufung", "de"), ("strasse", "de"),
                                       ("istanbul", "tr"), ("ISTANBUL", "tr"),
                                       ("şifreleme", "tr"), ("reseau", "fr"),
                                       ("données", "fr"), (nfd("données"), "fr")])
def test_accents_case_and_punctuation_fold_alike_on_both_engines(world, query, key):
    """Every word of the query is in the record: a full keyword score, on either backend."""
    api, ids = world
    found = api.search(query, mode="keyword")["results"]
    assert [(r["id"], r["score"]) for r in found] == [(ids[key], 1.0)]


@pytest.mark.parametrize("query", ["天气预报怎么样", "量子计算机的发展"])
@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
def test_a_query_the_model_cannot_read_finds_nothing_without_a_keyword_hit(world, query, mode):
    api, _ = world
    assert api.search(query, mode=mode)["results"] == []


def test_a_query_the_model_cannot_read_brings_only_keyword_hits(world):
    api, ids = world
    assert [r["id"] for r in api.search("性能", mode="semantic")["results"]] == [ids["zh"]]


def test_near_identical_chinese_titles_are_duplicate_hints(api):
    first = api.create(title=ZH[0], rationale=ZH[1])
    api.create(title="日志统一输出为JSON格式", rationale="方便集中收集。")
    near = api.create(title="使用数据库连接池来提高性能", rationale="几乎相同")
    hints = near["possible_duplicates"]
    assert hints[0]["id"] == first["id"] and hints[0]["score"] > 0.7


def test_tags_author_and_files_are_stored_and_matched_in_nfc(api):
    rec = api.create(tags=["réseau", nfd("réseau")], author=nfd("José Müller"),
                     files_affected=[nfd("données/réseau.py")])
    assert rec["tags"] == ["réseau"]
    assert rec["author"] == "José Müller"
    assert rec["files_affected"] == ["données/réseau.py"]
    for name, value in (("tag", nfd("réseau")), ("tag", "réseau"), ("author", nfd("José Müller")),
                        ("file", nfd("données/réseau.py")), ("file", "données/réseau.py")):
        query = urlencode({name: value})
        listed = api.server.get(api.base + "?" + query).json["items"]
        assert [r["id"] for r in listed] == [rec["id"]], query
    long = api.create(tags=[nfd("ä" * 64)])  # 128 code points in NFD, 64 letters
    assert long["tags"] == ["ä" * 64]


def test_decisions_on_a_file_are_found_whichever_form_its_path_arrives_in(server, api):
    rec = api.create(title="Retry policy", files_affected=["données/réseau.py"])
    from plugins.memory.plugin import describe_files, query_context
    project = server.kernel.projects.get(api.pid)
    for path in ("données/réseau.py", nfd("données/réseau.py")):  # the code index's hooks
        found = describe_files(server.kernel, project, [path])
        assert [(f["id"], f["path"]) for f in found] == [(rec["id"], path)]
        parts = query_context(server.kernel, project, "retry", [{"source_file": path,
                                                                  "score": 1.0}], 500)
        assert rec["id"] in json.dumps(parts)


def test_non_ascii_records_export_and_import_byte_identical(server, world, tmp_path):
    api, _ = world
    exported = server.get(api.url(tail="export"))
    line = next(json.loads(x) for x in exported.body.decode().splitlines() if "TOML" in x)
    assert line["memory"]["evidence"] == ["бенчмарк показал ускорение парсинга", "Müller approved"]
    target = Api(server, tmp_path)
    r = server.post(target.url(tail="import"), body=exported.body,
                    headers={"Content-Type": "application/x-ndjson"})
    assert r.status == 200, r.body
    assert server.get(target.url(tail="export")).body == exported.body
    assert titles(target.search("показал", mode="keyword")) == ["Config format is TOML"]


def test_a_database_of_the_release_before_is_migrated(tmp_path, backend):
    """Records written before the keyword columns (list fields JSON-escaped, tags in NFD, the
    index over the raw text) are found by their words once the store opens the database."""
    from plugins.memory import records
    from plugins.memory.models import MemoryIn
    from plugins.memory.store import FIELDS, MIGRATIONS, MemoryStore
    rec = records.build(MemoryIn(title=ZH[0], rationale=ZH[1]).model_dump(), root=None,
                        now="2026-01-01T00:00:00.000Z", head="", errors=[])
    rec.update(evidence=["бенчмарк показал"], tags=[nfd("réseau")])
    row = [json.dumps(rec[f]) if isinstance(rec[f], list) else
           int(rec[f]) if isinstance(rec[f], bool) else rec[f] for f in FIELDS]
    insert = (f"INSERT INTO memories ({', '.join(FIELDS)}, content_sha) "
              f"VALUES ({', '.join('?' * (len(FIELDS) + 1))})")
    if backend == "sqlite":
        from kernel.storage import Database
        old = Database(tmp_path / "memory.db", MIGRATIONS[:3])
        with old.transaction() as conn:
            conn.execute(insert, (*row, records.content_sha(rec)))
        old.close()
        store = MemoryStore(Database(tmp_path / "memory.db", MIGRATIONS))
    else:
        from kernel.pg import PgBackend
        from plugins.memory.pgstore import PG_MIGRATIONS, SETTING, PgMemoryStore
        from tests.support import fresh_pg_dsn
        pg = PgBackend(fresh_pg_dsn(), 2)
        with pg.database("memory", PG_MIGRATIONS[:5]).scoped({SETTING: "p"}).transaction() as c:
            c.execute(insert, (*row, records.content_sha(rec)))
        store = PgMemoryStore(pg.database("memory", PG_MIGRATIONS), "p")
    from plugins.memory.search import match_expression, terms
    for query in ("数据库", "показал", "reseau"):
        words = terms(query)
        hits = store.keyword(match_expression(words), words, {}, "2026-01-01", 5)
        assert [h["id"] for h, _ in hits] == [rec["id"]], query
    assert store.get(rec["id"])["tags"] == ["réseau"]
