package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// consume: `consume --group G --topic T ...` runs K push consumers (--instances, default 1) of one
// group, each printing {"event": "msg", "instance": k, ...} per delivery. Options: --broadcast,
// --orderly, --expr TAGS or --sql EXPR, --fail-all (every delivery asks to be retried) with
// --max-reconsume M. It leaves once --expect deliveries in all (and --expect-each per instance)
// arrived and --linger more seconds passed (rc 0), or at --timeout (rc 3).
func consume(a *args) int {
	topic, group := a.required("topic"), a.required("group")
	instances := a.integer("instances", 1)
	counts := make([]int64, instances)
	var consumers []rocketmq.PushConsumer
	defer func() {
		for _, c := range consumers {
			c.Shutdown()
		}
	}()
	for k := 0; k < instances; k++ {
		c, err := newPushConsumer(a, group, k)
		if err == nil {
			err = c.Subscribe(topic, selector(a), listener(a, k, counts))
		}
		if err == nil {
			err = c.Start()
		}
		if err != nil {
			emit("start_error", map[string]interface{}{"instance": k, "error": err.Error()})
			return 1
		}
		consumers = append(consumers, c)
	}
	emit("started", map[string]interface{}{"instances": instances})
	done := awaitCounts(counts, a.integer("expect", 0), a.integer("expect-each", 0), a.duration("timeout", 60))
	time.Sleep(a.duration("linger", 1))
	emit("done", map[string]interface{}{"counts": fmt.Sprint(counts), "complete": done})
	if !done {
		return 3
	}
	return 0
}

func newPushConsumer(a *args, group string, k int) (rocketmq.PushConsumer, error) {
	opts := []consumer.Option{
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{a.required("namesrv")})),
		consumer.WithGroupName(group),
		// consumers in one process need their own client instance, or they would be one group member
		consumer.WithInstance(fmt.Sprintf("consumer-%d", k)),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	}
	if a.flag("broadcast") {
		opts = append(opts, consumer.WithConsumerModel(consumer.BroadCasting))
	}
	if a.flag("orderly") {
		opts = append(opts, consumer.WithConsumerOrder(true))
	}
	if a.get("max-reconsume", "") != "" {
		opts = append(opts, consumer.WithMaxReconsumeTimes(int32(a.integer("max-reconsume", 16))))
	}
	return rocketmq.NewPushConsumer(opts...)
}

func selector(a *args) consumer.MessageSelector {
	if sql := a.get("sql", ""); sql != "" {
		return consumer.MessageSelector{Type: consumer.SQL92, Expression: sql}
	}
	return consumer.MessageSelector{Type: consumer.TAG, Expression: a.get("expr", "*")}
}

func listener(a *args, k int, counts []int64) func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
	failAll := a.flag("fail-all")
	return func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, msg := range msgs {
			data := record(msg)
			data["instance"] = k
			emit("msg", data)
			atomic.AddInt64(&counts[k], 1)
		}
		if failAll {
			return consumer.ConsumeRetryLater, nil
		}
		return consumer.ConsumeSuccess, nil
	}
}

func awaitCounts(counts []int64, expect, expectEach int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		total, eachDone := int64(0), true
		for k := range counts {
			n := atomic.LoadInt64(&counts[k])
			total += n
			eachDone = eachDone && n >= int64(expectEach)
		}
		if total >= int64(expect) && eachDone {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}
