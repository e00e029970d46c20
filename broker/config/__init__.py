"""Configuration plumbing shared by mqnamesrv and mqbroker: Java .properties files and typed models.

The CLI entry points call `load_properties` and `load_model`; the typed models themselves live next
to the component they configure (broker.namesrv.config, the broker's own config module).
"""

from __future__ import annotations

from broker.config.errors import ConfigError
from broker.config.properties import load_properties, parse_properties
from broker.config.typed import dump_properties, load_model

__all__ = ["ConfigError", "dump_properties", "load_model", "load_properties", "parse_properties"]
