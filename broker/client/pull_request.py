"""The PULL_MESSAGE request of every pull path of the SDK, built in one place.

Three readers pull: the push and lite pull consumers' long-polling loop (puller: commits its offset,
parks on the broker with SUSPEND), the admin tools' range reads (queue_reader) and the Spark source's
range reads (broker.spark.client: larger answers). They differ only in the arguments of `pull_request()`.
"""

from __future__ import annotations

from broker.client.api import PullSysFlag
from broker.client.message import MessageQueue
from broker.client.subscription import SubscriptionData
from broker.protocol.codes import LanguageCode, RequestCode
from broker.protocol.command import RemotingCommand
from broker.protocol.headers import PullMessageRequestHeader

__all__ = ["pull_request", "pull_sys_flag"]


def pull_sys_flag(commit_offset: int, suspend: bool, subscription: bool) -> int:
    """PullSysFlag bits: COMMIT_OFFSET when there is an offset to commit, SUSPEND to let the broker park the
    pull, SUBSCRIPTION when the request carries the subscription the broker filters by."""
    flag = 0
    if commit_offset > 0:
        flag |= PullSysFlag.COMMIT_OFFSET
    if suspend:
        flag |= PullSysFlag.SUSPEND
    if subscription:
        flag |= PullSysFlag.SUBSCRIPTION
    return flag


def pull_request(
    group: str,
    mq: MessageQueue,
    offset: int,
    max_nums: int,
    sub: SubscriptionData,
    *,
    commit_offset: int = -1,
    suspend_ms: int | None = None,
    post_subscription: bool = True,
    max_bytes: int | None = None,
) -> RemotingCommand:
    """PULL_MESSAGE for up to `max_nums` messages of `mq` from queue offset `offset`, filtered by `sub`.

    `commit_offset` > 0 is committed by the same request; `suspend_ms` not None lets the broker hold the
    pull that long when nothing is there; `post_subscription` False leaves the subscription to what the
    group's heartbeat registered; `max_bytes` None leaves the answer's size to the broker's default.
    """
    header = PullMessageRequestHeader(
        consumer_group=group,
        topic=mq.topic,
        queue_id=mq.queue_id,
        queue_offset=offset,
        max_msg_nums=max_nums,
        sys_flag=pull_sys_flag(commit_offset, suspend_ms is not None, post_subscription),
        commit_offset=max(commit_offset, 0),
        suspend_timeout_millis=suspend_ms or 0,
        subscription=sub.sub_string,
        sub_version=sub.sub_version,
        expression_type=sub.expression_type,
        max_msg_bytes=max_bytes,
        broker_name=mq.broker_name,
    )
    return RemotingCommand(
        code=RequestCode.PULL_MESSAGE, ext_fields=header.to_ext_fields(), language=LanguageCode.PYTHON
    )
