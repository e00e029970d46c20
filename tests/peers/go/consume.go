package main

import (
	"context"
	"fmt"
	"sync"
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
// arrived and --linger more seconds passed (rc 0), or at --timeout (rc 3). With --send-count N it
// first waits until the instances own the topic's queues between them (printing {"event": "balanced"}),
// then sends N canonical messages (--origin) itself, so no rebalance happens while they are consumed
// (clustering only).
func consume(a *args) int {
	topic, group := a.required("topic"), a.required("group")
	instances := a.integer("instances", 1)
	counts := make([]int64, instances)
	owners := newOwnership(topic, instances)
	var consumers []rocketmq.PushConsumer
	defer func() {
		for _, c := range consumers {
			c.Shutdown()
		}
	}()
	for k := 0; k < instances; k++ {
		c, err := newPushConsumer(a, group, k, owners)
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
	if sendCount := a.integer("send-count", 0); sendCount > 0 {
		if !owners.await(a.duration("timeout", 60)) {
			emit("unbalanced", map[string]interface{}{"owned": owners.sizes()})
			return 3
		}
		emit("balanced", map[string]interface{}{"queues": owners.queues(), "owned": owners.sizes()})
		if rc := sendFromConsumer(a, topic, sendCount); rc != 0 {
			return rc
		}
	}
	done := awaitCounts(counts, a.integer("expect", 0), a.integer("expect-each", 0), a.duration("timeout", 60))
	time.Sleep(a.duration("linger", 1))
	emit("done", map[string]interface{}{"counts": fmt.Sprint(counts), "complete": done})
	if !done {
		return 3
	}
	return 0
}

func newPushConsumer(a *args, group string, k int, owners *ownership) (rocketmq.PushConsumer, error) {
	opts := []consumer.Option{
		consumer.WithStrategy(owners.strategy(k)),
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{a.required("namesrv")})),
		consumer.WithGroupName(group),
		// consumers in one process need their own client instance, or they would be one group member
		consumer.WithInstance(fmt.Sprintf("consumer-%d", k)),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	}
	if a.flag("broadcast") {
		opts = append(opts, consumer.WithConsumerModel(consumer.BroadCasting))
	}
	if creds, ok := a.credentials(); ok {
		opts = append(opts, consumer.WithCredentials(creds))
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

// ownership records what the allocation strategy (RocketMQ's average one) last gave each instance for
// the topic: the Go push consumer has no public view of its queues, but every rebalance goes through
// the strategy, and the client drops or adds the process queues right after it returns.
type ownership struct {
	topic    string
	mu       sync.Mutex
	all      int
	owned    []map[int]bool
	peersSaw []int // how many group members the instance's last rebalance knew of
}

func newOwnership(topic string, instances int) *ownership {
	return &ownership{topic: topic, owned: make([]map[int]bool, instances), peersSaw: make([]int, instances)}
}

func (o *ownership) strategy(k int) consumer.AllocateStrategy {
	return func(group, cid string, all []*primitive.MessageQueue, cids []string) []*primitive.MessageQueue {
		mine := consumer.AllocateByAveragely(group, cid, all, cids)
		if len(all) == 0 || all[0].Topic != o.topic { // the group's %RETRY% topic is balanced too
			return mine
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		o.all, o.peersSaw[k], o.owned[k] = len(all), len(cids), map[int]bool{}
		for _, mq := range mine {
			o.owned[k][mq.QueueId] = true
		}
		return mine
	}
}

// balanced: every instance's last rebalance saw all of them, and each queue has one owner. (Only
// clustering: broadcasting consumers take every queue without asking the strategy.)
func (o *ownership) balanced() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	union := map[int]bool{}
	total := 0
	for k, mine := range o.owned {
		if o.peersSaw[k] != len(o.owned) || (len(mine) == 0 && len(o.owned) <= o.all) {
			return false
		}
		for q := range mine {
			union[q] = true
		}
		total += len(mine)
	}
	return o.all > 0 && len(union) == o.all && total == o.all
}

func (o *ownership) await(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if o.balanced() {
			// the queues an instance lost are dropped just after the strategy returned
			time.Sleep(500 * time.Millisecond)
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

func (o *ownership) queues() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.all
}

func (o *ownership) sizes() []int {
	o.mu.Lock()
	defer o.mu.Unlock()
	sizes := make([]int, len(o.owned))
	for k, mine := range o.owned {
		sizes[k] = len(mine)
	}
	return sizes
}

// sendFromConsumer sends the canonical messages 0..n-1 (origin --origin) with SendSync.
func sendFromConsumer(a *args, topic string, n int) int {
	p, err := newProducer(a, a.get("producer-group", "PID-go-consume"), "consume-producer")
	if err == nil {
		err = p.Start()
	}
	if err != nil {
		emit("start_error", map[string]interface{}{"error": err.Error()})
		return 1
	}
	defer p.Shutdown()
	sendAll(p, a, "sync", topic, a.get("origin", "go"), n, a.integer("shards", 3))
	return 0
}
