"""RocketCluster: the Python client SDK users import, and (in submodules) the Kubernetes operator.

`from rocketcluster import Producer, PushConsumer, PullConsumer, TransactionProducer, Admin, Message` is the
SDK's documented API; `from rocketcluster.spark import RocketMQDataSource` is the PySpark data source. The
SDK lives in `broker.client` (it shares the protocol and transport packages with the broker), and this
package's public names are `broker.client.__all__`, read from there, never listed twice. They are resolved on
first use so that `import rocketcluster.model` (the operator) does not load the client, and
`import rocketcluster` never loads kopf, kubernetes, aiohttp or pyspark. See docs/design/packages.md.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # Type checkers and editors see the SDK's classes under the same names; a star import takes exactly
    # broker.client.__all__.
    from broker.client import *  # noqa: F403


def _sdk() -> ModuleType:
    return importlib.import_module("broker.client")


def __getattr__(name: str) -> Any:
    # Anything that is not an SDK name must raise AttributeError: `from rocketcluster import model` then falls
    # back to importing the submodule. Private names and the operator's submodules are answered without
    # loading the client, which would make the operator's imports pay for the SDK.
    if name == "__all__":
        return list(_sdk().__all__)
    if name.startswith("_") or importlib.util.find_spec(f"{__name__}.{name}") is not None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    sdk = _sdk()
    if name not in sdk.__all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(sdk, name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_sdk().__all__))
