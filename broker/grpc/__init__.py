"""The gRPC endpoint: RocketMQ 5's `apache.rocketmq.v2.MessagingService` served inside the broker process.

RocketMQ's proxy in "local" mode: every RPC becomes one of the broker's own remoting requests, answered by the
same processors a remoting client reaches (`local.py`), so no rule is copied here. Turned on by
`enableProxy=true` in broker.conf or `mqbroker --enable-proxy`; needs the optional `grpc` extra (its protobuf
stubs are the official Python SDK's, `rocketmq.grpc_protocol`).
"""
