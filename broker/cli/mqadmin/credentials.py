"""The credentials mqadmin signs with: `$ROCKETMQ_HOME/conf/tools.yml`, as RocketMQ 5.3.3's MQAdminStartup reads
them (`AclUtils.getAclRPCHook(ROCKETMQ_HOME + "/conf/tools.yml")`; keys `accessKey` and `secretKey`; the home
from the rocketmq.home.dir property, here `python -X rocketmq.home.dir=...`, else $ROCKETMQ_HOME). RocketMQ's
tools have no command-line flag or environment variable for the keys, and neither do we: a secret on a command
line is visible to every user of the host. No file, or a file without both keys: requests go unsigned.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from broker.protocol.signature import Credentials

__all__ = ["MAX_TOOLS_FILE", "CredentialsError", "tools_credentials", "tools_file"]

HOME_PROPERTY = "rocketmq.home.dir"
HOME_ENV = "ROCKETMQ_HOME"
MAX_TOOLS_FILE = 64 * 1024


class CredentialsError(ValueError):
    """tools.yml exists but cannot be used; the message names the file, never its content."""


def tools_file() -> Path | None:
    prop = sys._xoptions.get(HOME_PROPERTY)
    home = prop if isinstance(prop, str) and prop else os.environ.get(HOME_ENV)
    return Path(home) / "conf" / "tools.yml" if home else None


def tools_credentials(path: Path | None = None) -> Credentials | None:
    path = path or tools_file()
    if path is None or not path.is_file():
        return None
    import yaml  # type: ignore[import-untyped]  # no stubs installed

    try:
        raw = path.read_bytes()[: MAX_TOOLS_FILE + 1]
        if len(raw) > MAX_TOOLS_FILE:
            raise CredentialsError(f"{path} is larger than {MAX_TOOLS_FILE} bytes")
        data = yaml.safe_load(raw)
    except (OSError, yaml.YAMLError) as exc:
        raise CredentialsError(f"cannot read {path}: {type(exc).__name__}") from None
    if not isinstance(data, dict):
        return None
    access_key, secret_key = data.get("accessKey"), data.get("secretKey")
    if access_key is None or secret_key is None or not str(access_key).strip() or not str(secret_key).strip():
        return None  # RocketMQ: "Either AccessKey or secretKey is blank", unsigned
    return Credentials(str(access_key).strip(), str(secret_key).strip())
