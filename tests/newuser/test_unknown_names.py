"""Names that do not exist get a clear answer from mqadmin, never an internal one, and a typo'd group is
not created by the command that names it."""

from __future__ import annotations

from pathlib import Path

from broker.client import Admin
from tests.local_cluster import local_cluster
from tests.newuser.user_harness import mqadmin, user_env

NO_TOPIC = "topic NoSuchTopic does not exist: the NameServer has no route for it (mqadmin topicList lists the topics)"
NO_GROUP = "consumer group NoSuchGroup does not exist: no broker has its subscription or committed offsets"


async def test_unknown_topics_groups_and_messages(tmp_path: Path) -> None:
    async with local_cluster(tmp_path, autoCreateTopicEnable="true") as cluster:
        env = user_env(NAMESRV_ADDR=cluster.namesrv_addr)
        sent = await mqadmin("sendMessage", "-t", "TopicTest", "-p", "hello", "-k", "key1", env=env)
        assert sent.code == 0, sent
        # a consumer of a real group: consumeMessage's own group appears on the broker
        consumed = await mqadmin("consumeMessage", "-t", "TopicTest", "-c", "1", "-g", "RealGroup", env=env)
        assert consumed.code == 0 and "hello" in consumed.out, consumed

        outcome = await mqadmin("consumeMessage", "-t", "NoSuchTopic", env=env)
        assert (outcome.code, outcome.err.strip()) == (1, f"mqadmin consumeMessage: {NO_TOPIC}"), outcome
        assert "IllegalStateError" not in outcome.err

        outcome = await mqadmin("topicRoute", "-t", "NoSuchTopic", env=env)
        assert (outcome.code, outcome.err.strip()) == (1, f"mqadmin topicRoute: {NO_TOPIC}"), outcome

        unknown_id = "7F00000100002A9F0000000000000000"
        outcome = await mqadmin("queryMsgByUniqueKey", "-t", "TopicTest", "-i", unknown_id, env=env)
        assert outcome.code == 1 and outcome.out == "", outcome
        assert outcome.err.startswith(
            "mqadmin queryMsgByUniqueKey: no message of topic TopicTest has the unique key (client message id)"
            " 7F00000100002A9F0000000000000000"
        ), outcome

        outcome = await mqadmin("queryMsgByKey", "-t", "TopicTest", "-k", "nokey", env=env)
        assert (outcome.code, outcome.err.strip()) == (
            1,
            "mqadmin queryMsgByKey: no message of topic TopicTest has the key nokey",
        ), outcome
        found = await mqadmin("queryMsgByKey", "-t", "TopicTest", "-k", "key1", env=env)
        assert found.code == 0 and found.out.count("\n") == 2, found

        outcome = await mqadmin("consumerProgress", "-g", "NoSuchGroup", env=env)
        assert outcome.code == 1 and outcome.out == "", outcome
        assert outcome.err.startswith(f"mqadmin consumerProgress: {NO_GROUP}"), outcome
        progress = await mqadmin("consumerProgress", "-g", "RealGroup", "-t", "TopicTest", env=env)
        assert progress.code == 0 and "Diff Total" in progress.out, progress

        outcome = await mqadmin("resetOffsetByTime", "-g", "NoSuchGroup", "-t", "TopicTest", "-s", "now", env=env)
        assert outcome.code == 1 and outcome.err.startswith(f"mqadmin resetOffsetByTime: {NO_GROUP}"), outcome
        outcome = await mqadmin("resetOffsetByTime", "-g", "RealGroup", "-t", "NoSuchTopic", "-s", "now", env=env)
        assert (outcome.code, outcome.err.strip()) == (1, f"mqadmin resetOffsetByTime: {NO_TOPIC}"), outcome
        reset = await mqadmin("resetOffsetByTime", "-g", "RealGroup", "-t", "TopicTest", "-s", "now", env=env)
        assert reset.code == 0, reset

        # the typo'd group was not created by any of this
        async with Admin(cluster.namesrv_addr) as admin:
            assert not await admin.group_exists("NoSuchGroup")
            assert await admin.group_exists("RealGroup")
        broker = cluster.running_broker
        assert "NoSuchGroup" not in broker.groups.table
        assert broker.offsets.topics_of_group("NoSuchGroup") == set()
