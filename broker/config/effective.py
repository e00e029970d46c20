"""The effective configuration a server logs once at start: the keys whose value is not the default.

Sorted key=value lines, with the value of a key that names a secret (secretKey, password, credentials,
token) masked: the log goes to collectors and terminals that the secret must not reach.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

__all__ = ["MASK", "is_secret", "non_default_lines", "properties_of"]

MASK = "******"
_SECRET = re.compile(r"secret|password|passwd|credential|token", re.IGNORECASE)


def is_secret(key: str) -> bool:
    return _SECRET.search(key) is not None


def non_default_lines(effective: Mapping[str, str], defaults: Mapping[str, str]) -> list[str]:
    """`key=value` for every key of `effective` whose value differs from `defaults` (or has none there)."""
    lines = []
    for key in sorted(effective):
        value = effective[key]
        if defaults.get(key) == value:
            continue
        lines.append(f"{key}={MASK if is_secret(key) and value else value}")
    return lines


def properties_of(config: BaseModel) -> dict[str, str]:
    """The model's values under their RocketMQ key names, as a properties file spells them."""
    return {key: _text(value) for key, value in config.model_dump(by_alias=True).items()}


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)
