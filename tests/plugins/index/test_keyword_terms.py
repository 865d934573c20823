"""What the code index's keyword leg asks FTS5 for: identifiers split into their words,
stopwords dropped — unless every word is one, so a name made of them is still found."""

import unicodedata

from plugins.index.keywords import fts_query, fts_text


def test_identifiers_split_and_stopwords_drop():
    assert fts_query("how does parseConfigFile read the file") == (
        '"parseconfigfile" OR "parse" OR "config" OR "file" OR "read"')


def test_a_name_made_only_of_stopwords_is_still_searched():
    assert fts_query("only_in") == '"only" OR "in"'
    assert fts_query("is_not") == '"is" OR "not"'
    assert fts_query("  --  ") is None


def test_indexed_text_carries_the_parts_of_camel_case_names():
    assert set(fts_text("parseConfigFile").split()) == {"parseConfigFile", "parse", "Config",
                                                        "File"}


def test_words_are_any_scripts_letters_and_chinese_runs_are_phrases_of_pairs():
    """``[A-Za-z0-9]+`` searched ``données`` as ``donn OR es`` and ``计算税额`` not at all."""
    assert fts_query("données réseau") == '"données" OR "réseau"'
    assert fts_query(unicodedata.normalize("NFD", "réseau")) == '"réseau"'
    assert fts_query("Größenrechner") == '"größenrechner"'
    assert fts_query("计算税额 envoyer") == '"计算 算税 税额" OR "envoyer"'
    assert fts_query("ÉcoleNormale") == '"écolenormale" OR "école" OR "normale"'
    # a vowel sign or virama is part of the word, as FTS5's unicode61 reads it
    assert fts_query("हिन्दी व्याकरण") == '"हिन्दी" OR "व्याकरण"'
    assert fts_query("ภาษาไทย user_id") == '"ภาษาไทย" OR "user" OR "id"'


def test_indexed_text_is_nfkc_with_chinese_runs_as_pairs():
    assert "def  计算 算税 税额 额 ( 收入 入 )" in fts_text("def 计算税额(收入)")
    assert fts_text(unicodedata.normalize("NFD", "réseau")) == "réseau"
    assert set(fts_text("ÉcoleNormale").split()) == {"ÉcoleNormale", "École", "Normale"}
