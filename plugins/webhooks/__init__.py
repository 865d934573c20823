"""Webhooks: signed, retried, durable deliveries of kernel events to a team's own services."""
