"""Kubernetes resource quantities ("512Mi", "10Gi", "1.5G", "1e9") as exact numbers, to compare sizes."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Final

__all__ = ["parse_quantity"]

_SUFFIXES: Final = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
_FORM: Final = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))((?:[eE][+-]?\d+)|Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|)$")


def parse_quantity(text: str) -> Decimal:
    """The value of a quantity; ValueError names the text when it is not one."""
    found = _FORM.match(text.strip())
    if found is None:
        raise ValueError(f"{text!r} is not a quantity such as 512Mi, 10Gi or 1e9")
    number, suffix = found.groups()
    try:
        if suffix[:1] in ("e", "E") and suffix not in _SUFFIXES:
            return Decimal(number + suffix)
        return Decimal(number) * _SUFFIXES[suffix]
    except InvalidOperation as exc:
        raise ValueError(f"{text!r} is not a quantity such as 512Mi, 10Gi or 1e9") from exc
