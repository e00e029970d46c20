package main

import (
	"context"
	"encoding/base64"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// request: `request --topic T --count N --origin O [--request-timeout SECONDS]` sends N canonical
// messages with Producer.Request and prints {"event": "reply", "seq": i, ...} per reply, or
// {"event": "request_error"} with the error's text and how long it took.
func request(a *args) int {
	p, err := newProducer(a, a.get("group", "PID-go-requester"), "requester")
	if err == nil {
		err = p.Start()
	}
	if err != nil {
		emit("start_error", map[string]interface{}{"error": err.Error()})
		return 1
	}
	defer p.Shutdown()
	topic, origin := a.required("topic"), a.get("origin", "go")
	timeout := a.duration("request-timeout", 15)
	for i := 0; i < a.integer("count", 3); i++ {
		started := time.Now()
		reply, err := p.Request(context.Background(), timeout, message(origin, topic, i, 3))
		elapsed := time.Since(started).Milliseconds()
		if err != nil {
			emit("request_error", map[string]interface{}{"seq": i, "error": err.Error(), "elapsed_ms": elapsed})
			continue
		}
		emit("reply", map[string]interface{}{
			"seq": i, "topic": reply.Topic, "props": reply.GetProperties(),
			"reply_body_b64": base64.StdEncoding.EncodeToString(reply.Body), "elapsed_ms": elapsed,
		})
	}
	return 0
}

// respond: `respond --group G --topic T --expect N` answers every message of T with
// consumer.CreateReplyMessage(msg, "echo:" + body) sent by its own producer, printing
// {"event": "replied"} per reply; it leaves after N (rc 0) or --timeout (rc 3).
func respond(a *args) int {
	p, err := newProducer(a, a.get("producer-group", "PID-go-responder"), "responder-producer")
	if err == nil {
		err = p.Start()
	}
	if err != nil {
		emit("start_error", map[string]interface{}{"error": err.Error()})
		return 1
	}
	defer p.Shutdown()
	var replied int64
	c, err := rocketmq.NewPushConsumer(
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{a.required("namesrv")})),
		consumer.WithGroupName(a.required("group")),
		consumer.WithInstance("responder-consumer"),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	if err == nil {
		err = c.Subscribe(a.required("topic"), consumer.MessageSelector{}, func(ctx context.Context,
			msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, msg := range msgs {
				body := append([]byte("echo:"), msg.Body...)
				reply, err := consumer.CreateReplyMessage(msg, body)
				if err == nil {
					// CreateReplyMessage parses the body as properties instead of keeping it (in this
					// version of the client), so the driver sets it itself
					reply.Body = body
					var result *primitive.SendResult
					result, err = p.SendSync(ctx, reply)
					if err == nil {
						emit("replied", map[string]interface{}{"seq": msg.GetProperty("seq"),
							"status": sendStatus(result.Status), "reply_topic": reply.Topic})
					}
				}
				if err != nil {
					emit("reply_error", map[string]interface{}{"seq": msg.GetProperty("seq"),
						"error": strings.TrimSpace(err.Error())})
				}
				atomic.AddInt64(&replied, 1)
			}
			return consumer.ConsumeSuccess, nil
		})
	}
	if err == nil {
		err = c.Start()
	}
	if err != nil {
		emit("start_error", map[string]interface{}{"error": err.Error()})
		return 1
	}
	defer c.Shutdown()
	deadline := time.Now().Add(a.duration("timeout", 60))
	expect := int64(a.integer("expect", 1))
	for atomic.LoadInt64(&replied) < expect && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if atomic.LoadInt64(&replied) < expect {
		return 3
	}
	return 0
}
