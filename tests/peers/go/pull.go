package main

import (
	"context"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// pull: `pull --group G --topic T --expect N [--style poll|from]` reads T with the Go PullConsumer,
// printing {"event": "msg", ...} per message. Style poll (the default) is Subscribe, Poll and ACK:
// the client balances the queues and pulls in the background, ACK moves the group's offsets and
// Shutdown commits them to the broker. Style from reads each queue from offset 0 with PullFrom,
// which leaves the group's offsets alone. It leaves once N messages arrived and --linger more
// seconds passed (rc 0), or at --timeout (rc 3), and prints {"event": "done"}.
func pull(a *args) int {
	topic, style := a.required("topic"), a.get("style", "poll")
	c, err := rocketmq.NewPullConsumer(
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{a.required("namesrv")})),
		consumer.WithGroupName(a.required("group")),
		consumer.WithInstance("pull-consumer"),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	if err == nil {
		err = c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"})
	}
	if err == nil {
		err = c.Start()
	}
	if err != nil {
		emit("start_error", map[string]interface{}{"error": err.Error()})
		return 1
	}
	emit("started", map[string]interface{}{"style": style})
	expect, deadline := a.integer("expect", 0), time.Now().Add(a.duration("timeout", 60))
	got := 0
	if style == "from" {
		got = pullFrom(c, topic, expect, deadline)
	} else {
		got = poll(c, expect, deadline)
	}
	time.Sleep(a.duration("linger", 1))
	// Shutdown persists the offsets ACK moved: what `offsets committed` checks through the broker
	if err := c.Shutdown(); err != nil {
		emit("shutdown_error", map[string]interface{}{"error": err.Error()})
	}
	emit("done", map[string]interface{}{"count": got, "complete": got >= expect})
	if got < expect {
		return 3
	}
	return 0
}

func poll(c rocketmq.PullConsumer, expect int, deadline time.Time) int {
	got := 0
	for got < expect && time.Now().Before(deadline) {
		cr, err := c.Poll(context.Background(), time.Second)
		if consumer.IsNoNewMsgError(err) {
			continue
		}
		if err != nil {
			emit("pull_error", map[string]interface{}{"error": err.Error()})
			time.Sleep(200 * time.Millisecond)
			continue
		}
		for _, msg := range cr.GetMsgList() {
			emit("msg", record(msg))
			got++
		}
		c.ACK(context.Background(), cr, consumer.ConsumeSuccess)
	}
	return got
}

// pullFrom reads every queue of topic from offset 0 to its end, until expect messages or deadline.
func pullFrom(c rocketmq.PullConsumer, topic string, expect int, deadline time.Time) int {
	queues, err := c.GetTopicRouteInfo(topic)
	if err != nil {
		emit("pull_error", map[string]interface{}{"error": err.Error()})
		return 0
	}
	next := make([]int64, len(queues))
	got := 0
	for got < expect && time.Now().Before(deadline) {
		for i, mq := range queues {
			result, err := c.PullFrom(context.Background(), mq, next[i], 32)
			if err != nil {
				emit("pull_error", map[string]interface{}{"queue_id": mq.QueueId, "error": err.Error()})
				time.Sleep(200 * time.Millisecond)
				continue
			}
			if result.Status == primitive.PullFound {
				for _, msg := range result.GetMessageExts() {
					emit("msg", record(msg))
					got++
				}
			}
			next[i] = result.NextBeginOffset
		}
	}
	return got
}
