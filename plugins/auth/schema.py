"""The auth plugin's tables in the shared PostgreSQL database (server mode's tokens and rate
buckets), version by version; on SQLite they stay in the home's files."""

from plugins.auth.ratelimit import PG_MIGRATION as RATE_TABLE
from plugins.auth.tokens import PG_MIGRATION as TOKEN_TABLES
from plugins.auth.tokens import TokenFile, copy_tokens, tokens_path

PG_MIGRATIONS = [TOKEN_TABLES + RATE_TABLE]


def storage_component(settings):
    """For ``neuralmind storage``: tokens.json (or ``[server] tokens_file``) into auth_tokens.
    Rate buckets are not copied: they refill within a burst's time. The file is read here,
    first: one that is not valid is a line of its own (a TokenError) before ``storage check``
    reports or ``storage migrate`` copies anything."""
    from neuralmind import StorageComponent, StoredFile
    TokenFile(tokens_path(settings)).listing()
    return StorageComponent("auth", PG_MIGRATIONS, ("auth_tokens", "auth_tokens_version",
                                                    "auth_rate"),
                            lambda home: [StoredFile(tokens_path(home.settings))], copy_tokens)
