"""The auth plugin's tables in the shared PostgreSQL database (server mode's tokens and rate
buckets), version by version; on SQLite they stay in the home's files."""

from plugins.auth.ratelimit import PG_MIGRATION as RATE_TABLE
from plugins.auth.tokens import PG_MIGRATION as TOKEN_TABLES
from plugins.auth.tokens import copy_tokens, tokens_path

PG_MIGRATIONS = [TOKEN_TABLES + RATE_TABLE]


def storage_component():
    """For ``neuralmind storage``: tokens.json (or ``[server] tokens_file``) into auth_tokens.
    Rate buckets are not copied: they refill within a burst's time."""
    from neuralmind import StorageComponent, StoredFile
    return StorageComponent("auth", PG_MIGRATIONS, ("auth_tokens", "auth_tokens_version",
                                                    "auth_rate"),
                            lambda home: [StoredFile(tokens_path(home.settings))], copy_tokens)
