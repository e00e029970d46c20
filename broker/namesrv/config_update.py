"""UPDATE_NAMESRV_CONFIG (318): validate `key=value` updates into a new NamesrvConfig and persist them.

`NamesrvProcessors` swaps in the returned config, so the settings its handlers read per request
(orderMessageEnable, enableAllTopicList, enableTopicList, returnOrderTopicConfigToBroker,
needWaitForService, waitSecondsForService) change at once; the rest (ports, paths, the scan period)
take effect at the next start. As RocketMQ does, the change is written to `configStorePath`, and the
black-listed keys are refused. Unknown keys and bad values are refused too (RocketMQ skips them).
"""

from __future__ import annotations

from collections.abc import Mapping

from broker.config.errors import ConfigError
from broker.config.rewrite import update_properties_file
from broker.config.typed import load_model
from broker.namesrv.config import NamesrvConfig
from broker.protocol.codes import ResponseCode

__all__ = ["BLACK_LIST", "NamesrvConfigRefused", "updated_config"]

#: RocketMQ's default configBlackList of the NameServer.
BLACK_LIST = frozenset({"configBlackList", "configStorePath", "kvConfigPath"})


class NamesrvConfigRefused(Exception):
    """An update that changes nothing: `response_code` and the reason."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.response_code = int(code)


def updated_config(config: NamesrvConfig, updates: Mapping[str, str]) -> NamesrvConfig:
    """The config with `updates` applied and persisted; NamesrvConfigRefused when a key is refused."""
    if not updates:
        raise NamesrvConfigRefused(ResponseCode.INVALID_PARAMETER, "no key=value in the UPDATE_NAMESRV_CONFIG body")
    refused = sorted(set(updates) & BLACK_LIST)
    if refused:
        raise NamesrvConfigRefused(
            ResponseCode.NO_PERMISSION, f"Can not update config in black list: {', '.join(refused)}"
        )
    current = config.model_dump(by_alias=True)
    try:
        new = load_model(NamesrvConfig, {**current, **updates}, "UPDATE_NAMESRV_CONFIG")
    except ConfigError as exc:
        raise NamesrvConfigRefused(ResponseCode.INVALID_PARAMETER, str(exc)) from None
    try:
        update_properties_file(new.config_store_path, updates)
    except OSError as exc:
        raise NamesrvConfigRefused(ResponseCode.SYSTEM_ERROR, f"cannot persist the NameServer config: {exc}") from None
    return new
