"""What the code index's keyword leg asks FTS5 for: identifiers split into their words,
stopwords dropped — unless every word is one, so a name made of them is still found."""

from plugins.index.search import fts_query, fts_text


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
