"""The one configuration error type; library code raises it and only broker.cli turns it into an exit."""

from __future__ import annotations

__all__ = ["ConfigError"]


class ConfigError(ValueError):
    """A configuration file or value is invalid; the message names the file and the key."""
