"""Write changed keys back into a `.properties` file, keeping its comments, order and other keys.

UPDATE_BROKER_CONFIG persists into the broker's `-c` file and UPDATE_NAMESRV_CONFIG into the
NameServer's configStorePath, as RocketMQ does, so a restart keeps what an operator changed at run
time. RocketMQ rewrites the whole file with every effective key; we change only the updated lines
(appending keys the file lacked), so the file stays the one the operator wrote. The new file
replaces the old one atomically (written beside it, fsynced, renamed).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

__all__ = ["escape_value", "update_properties_file"]

# A key at the start of a line, ended by the first unescaped separator (Properties.load's rule,
# simplified to keys without escapes, which is all RocketMQ's config keys are).
_KEY = re.compile(r"^[ \t\f]*([^\s=:#!\\]+)[ \t\f]*[=:\s]")


def escape_value(value: str) -> str:
    """A value as Properties.store writes it: backslashes doubled, line breaks escaped, a leading space kept."""
    text = value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return "\\" + text if text.startswith(" ") else text


def update_properties_file(path: str | os.PathLike[str], updates: Mapping[str, str]) -> None:
    """Set `updates` in the file at `path` (created when missing). Raises OSError when it cannot be written."""
    target = Path(path)
    try:
        lines = target.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        lines = []
    pending = dict(updates)
    out: list[str] = []
    continued = skipping = False
    for line in lines:
        is_continuation = continued
        stripped = line.rstrip()
        continued = stripped.endswith("\\") and (len(stripped) - len(stripped.rstrip("\\"))) % 2 == 1
        if is_continuation:
            if not skipping:  # the rest of an entry we replaced goes with it
                out.append(line)
            continue
        match = _KEY.match(line + " ")
        key = match.group(1) if match else None
        skipping = key is not None and key in updates and not line.lstrip().startswith(("#", "!"))
        if not skipping:
            out.append(line)
        elif key in pending:
            out.append(f"{key}={escape_value(pending.pop(key))}")
        # else: a second entry of the same key; the first one now holds the value
    out.extend(f"{key}={escape_value(value)}" for key, value in pending.items())
    target.parent.mkdir(parents=True, exist_ok=True)  # as RocketMQ's string2File does
    tmp = target.with_name(f".{target.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write("\n".join(out) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, target)
