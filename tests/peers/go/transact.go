package main

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// outcomes answer the local transaction per message: commit, rollback, or unknown now and then
// commit/rollback when the broker checks back (check-commit, check-rollback).
type outcomes struct {
	plan    []string
	checked sync.Map
}

func (o *outcomes) ExecuteLocalTransaction(msg *primitive.Message) primitive.LocalTransactionState {
	seq, _ := strconv.Atoi(msg.GetProperty("seq"))
	switch o.plan[seq] {
	case "commit":
		return primitive.CommitMessageState
	case "rollback":
		return primitive.RollbackMessageState
	}
	return primitive.UnkonwnState
}

func (o *outcomes) CheckLocalTransaction(msg *primitive.MessageExt) primitive.LocalTransactionState {
	seq, _ := strconv.Atoi(msg.GetProperty("seq"))
	if _, seen := o.checked.LoadOrStore(seq, true); !seen {
		emit("check", map[string]interface{}{"seq": seq, "transaction_id": msg.TransactionId})
	}
	if o.plan[seq] == "check-rollback" {
		return primitive.RollbackMessageState
	}
	return primitive.CommitMessageState
}

func localState(state primitive.LocalTransactionState) string {
	switch state {
	case primitive.CommitMessageState:
		return "COMMIT_MESSAGE"
	case primitive.RollbackMessageState:
		return "ROLLBACK_MESSAGE"
	}
	return "UNKNOW"
}

// transact: `transact --group G --topic T --outcome O ...` sends message i in a transaction whose
// local outcome is the i-th --outcome, prints {"event": "sent", "local_state": ...}, then stays until
// every check-back it expects arrived (or --timeout) and --linger more seconds passed.
func transact(a *args) int {
	plan := a.all("outcome")
	listener := &outcomes{plan: plan}
	p, err := rocketmq.NewTransactionProducer(listener,
		producer.WithNsResolver(primitive.NewPassthroughResolver([]string{a.required("namesrv")})),
		producer.WithGroupName(a.required("group")),
		producer.WithRetry(2),
	)
	if err == nil {
		err = p.Start()
	}
	if err != nil {
		emit("start_error", map[string]interface{}{"error": err.Error()})
		return 1
	}
	defer p.Shutdown()
	topic, origin := a.required("topic"), a.get("origin", "go")
	checks := 0
	for i, outcome := range plan {
		if outcome == "check-commit" || outcome == "check-rollback" {
			checks++
		}
		result, err := p.SendMessageInTransaction(context.Background(), message(origin, topic, i, 3))
		if err != nil {
			emit("send_error", map[string]interface{}{"seq": i, "error": err.Error()})
			continue
		}
		data := sent(result.SendResult)
		data["seq"], data["local_state"] = i, localState(result.State)
		emit("sent", data)
	}
	deadline := time.Now().Add(a.duration("timeout", 60))
	for time.Now().Before(deadline) && countChecked(&listener.checked) < checks {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(a.duration("linger", 1))
	if countChecked(&listener.checked) < checks {
		return 3
	}
	return 0
}

func countChecked(m *sync.Map) int {
	n := 0
	m.Range(func(_, _ interface{}) bool { n++; return true })
	return n
}
