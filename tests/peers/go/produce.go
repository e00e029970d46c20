package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// delayLevel is what `delay` mode sets: level 2 (1 s on the interop broker).
const delayLevel = 2

func newProducer(a *args, group, instance string) (rocketmq.Producer, error) {
	opts := []producer.Option{
		producer.WithNsResolver(primitive.NewPassthroughResolver([]string{a.required("namesrv")})),
		producer.WithGroupName(group),
		producer.WithInstanceName(instance),
		producer.WithRetry(2),
		// the sharding key picks the queue (ordered mode); messages without one go to a random queue
		producer.WithQueueSelector(producer.NewHashQueueSelector()),
	}
	if creds, ok := a.credentials(); ok {
		opts = append(opts, producer.WithCredentials(creds))
	}
	return rocketmq.NewProducer(opts...)
}

// produce: `produce --send MODE:TOPIC ...` sends the canonical messages 0..count-1 with one API of the
// Go producer per --send. MODE is sync, async, oneway, batch (one SendSync of all), ordered (the
// message's shard as sharding key, so one shard stays on one queue), delay (level 2), timed
// (a delivery time --deliver-in seconds ahead) or steady (sync, --interval seconds apart: a producer
// through a failover). Prints {"event": "sent"} per result or "send_error".
func produce(a *args) int {
	p, err := newProducer(a, a.get("group", "PID-go-iop"), a.get("instance", "producer"))
	if err == nil {
		err = p.Start()
	}
	if err != nil {
		emit("start_error", map[string]interface{}{"error": err.Error()})
		return 1
	}
	defer p.Shutdown()
	origin, count, shards := a.get("origin", "go"), a.integer("count", 4), a.integer("shards", 3)
	for _, send := range a.all("send") {
		parts := strings.SplitN(send, ":", 2)
		sendAll(p, a, parts[0], parts[1], origin, count, shards)
	}
	time.Sleep(a.duration("linger", 0.5)) // one-way sends are fire-and-forget
	return 0
}

func sendAll(p rocketmq.Producer, a *args, mode, topic, origin string, count, shards int) {
	ctx := context.Background()
	msgs := make([]*primitive.Message, count)
	for i := range msgs {
		msgs[i] = message(origin, topic, i, shards)
	}
	report := func(i int, result *primitive.SendResult, err error) {
		if err != nil {
			emit("send_error", map[string]interface{}{"mode": mode, "topic": topic, "seq": i, "error": err.Error()})
			return
		}
		data := sent(result)
		data["mode"], data["topic"], data["seq"] = mode, topic, i
		emit("sent", data)
	}
	switch mode {
	case "batch":
		result, err := p.SendSync(ctx, msgs...)
		if err != nil {
			emit("send_error", map[string]interface{}{"mode": mode, "topic": topic, "error": err.Error()})
			return
		}
		data := sent(result)
		data["mode"], data["topic"], data["n"] = mode, topic, count
		emit("sent", data)
	case "async":
		var wg sync.WaitGroup
		for i, msg := range msgs {
			i := i
			wg.Add(1)
			err := p.SendAsync(ctx, func(_ context.Context, result *primitive.SendResult, err error) {
				report(i, result, err)
				wg.Done()
			}, msg)
			if err != nil {
				report(i, nil, err)
				wg.Done()
			}
		}
		wg.Wait()
	case "oneway":
		for i, msg := range msgs {
			if err := p.SendOneWay(ctx, msg); err != nil {
				report(i, nil, err)
				continue
			}
			emit("sent", map[string]interface{}{"mode": mode, "topic": topic, "seq": i})
		}
	case "sync", "ordered", "delay", "timed", "steady":
		for i, msg := range msgs {
			switch mode {
			case "ordered":
				msg.WithShardingKey(fmt.Sprintf("shard-%d", i%shards))
			case "delay":
				msg.WithDelayTimeLevel(delayLevel)
			case "timed":
				due := time.Now().Add(a.duration("deliver-in", 2))
				msg.WithDelayTimestamp(due)
			}
			result, err := p.SendSync(ctx, msg)
			report(i, result, err)
			if mode == "steady" {
				time.Sleep(a.duration("interval", 0.05))
			}
		}
	default:
		emit("send_error", map[string]interface{}{"mode": mode, "topic": topic, "error": "unknown send mode"})
	}
}
