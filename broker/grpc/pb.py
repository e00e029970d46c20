"""The protobuf messages and the service base class of `apache.rocketmq.v2`, from the official Python SDK.

The one place that imports them: `rocketmq-python-client` publishes the generated modules (definition.proto,
service.proto), so the endpoint serves exactly the schema the SDK speaks and nothing generated lives in this
repository. They carry no type information: their values are `Any` to the type checker.
"""

from __future__ import annotations

from rocketmq.grpc_protocol import definition_pb2 as definition
from rocketmq.grpc_protocol import service_pb2 as service
from rocketmq.grpc_protocol import service_pb2_grpc as service_grpc

__all__ = ["definition", "service", "service_grpc"]
