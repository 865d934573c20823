"""tier2 bridge: the commercial tier's seam into the MIT core (hash-chained audit, seat checks,
self-hosted config). It consumes the core's hooks and events; nothing in the core imports it."""
