"""The auth plugin's tables in the shared PostgreSQL database (server mode's tokens and rate
buckets), version by version; on SQLite they stay in the home's files."""

from plugins.auth.ratelimit import PG_MIGRATION as RATE_TABLE
from plugins.auth.tokens import PG_MIGRATION as TOKEN_TABLES

PG_MIGRATIONS = [TOKEN_TABLES + RATE_TABLE]
