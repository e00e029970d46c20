"""Typed configuration from properties: validate a key->string mapping into a pydantic model.

Used by broker.namesrv.config (NamesrvConfig) and the broker's config; the models use RocketMQ's own
key names as aliases and forbid unknown keys, so a typo in a config file is reported by name.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pydantic import AliasChoices, BaseModel, ValidationError

from broker.config.effective import is_secret
from broker.config.errors import ConfigError

__all__ = ["dump_properties", "load_model", "model_aliases", "validation_problems"]

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)


def model_aliases(model: type[BaseModel]) -> dict[str, str]:
    """Every key `model` accepts (alias, serialization alias, validation aliases) -> its field name."""
    keys: dict[str, str] = {}
    for name, f in model.model_fields.items():
        for alias in (f.alias, f.serialization_alias):
            if alias:
                keys[alias] = name
        if isinstance(f.validation_alias, AliasChoices):
            keys.update({c: name for c in f.validation_alias.choices if isinstance(c, str)})
        elif isinstance(f.validation_alias, str):
            keys[f.validation_alias] = name
    return keys


def load_model(model: type[M], values: Mapping[str, Any], source: str = "config") -> M:
    """Build `model` from RocketMQ-named keys; unknown keys and bad values raise ConfigError naming them."""
    known = {field.alias or name for name, field in model.model_fields.items()}
    unknown = sorted(key for key in values if key not in known)
    if unknown:
        raise ConfigError(
            f"{source}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
            f"(known keys: {', '.join(sorted(known))})"
        )
    try:
        return model.model_validate(dict(values))
    except ValidationError as exc:
        raise ConfigError(f"{source}: {validation_problems(exc)}") from None


def validation_problems(exc: ValidationError, secret: Callable[[str], bool] = is_secret) -> str:
    """`exc` as one line, a `key=value: why` per problem. The value is left out where `secret(key)`, and for a
    check of several keys (a model-level rule, no key), whose input is every value given, secrets included."""
    problems = []
    for error in exc.errors():
        key = ".".join(str(part) for part in error["loc"])
        why = error["msg"].removeprefix("Value error, ")
        value = error.get("input")
        if not key:
            problems.append(why)
        elif secret(key) or isinstance(value, Mapping):
            problems.append(f"{key}: {why}")
        else:
            problems.append(f"{key}={value!r}: {why}")
    return "; ".join(problems)


def dump_properties(config: BaseModel) -> str:
    """`key=value` lines with RocketMQ key names, like MixAll.printObjectProperties (booleans lower-case)."""
    lines = []
    for key, value in config.model_dump(by_alias=True).items():
        lines.append(f"{key}={_text(value)}")
    return "\n".join(lines) + "\n"


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)
