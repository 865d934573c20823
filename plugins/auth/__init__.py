"""The auth plugin: loopback token by default, per-user hashed tokens with roles in server mode."""
