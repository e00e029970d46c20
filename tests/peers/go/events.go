package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

var emitLock sync.Mutex

// emit prints one JSON line per event on stdout; the Python tests parse them.
func emit(event string, data map[string]interface{}) {
	line := map[string]interface{}{"event": event}
	for k, v := range data {
		line[k] = v
	}
	encoded, err := json.Marshal(line)
	if err != nil {
		encoded = []byte(fmt.Sprintf(`{"event":"encode_error","error":%q}`, err.Error()))
	}
	emitLock.Lock()
	defer emitLock.Unlock()
	os.Stdout.Write(append(encoded, '\n'))
}

func nowMs() int64 {
	return time.Now().UnixNano() / int64(time.Millisecond)
}

// record is a delivery in the shape of interop_harness.Record.from_event.
func record(msg *primitive.MessageExt) map[string]interface{} {
	queueID := -1
	if msg.Queue != nil {
		queueID = msg.Queue.QueueId
	}
	return map[string]interface{}{
		"topic":             msg.Topic,
		"tags":              msg.GetTags(),
		"keys":              msg.GetKeys(),
		"body_b64":          base64.StdEncoding.EncodeToString(msg.Body),
		"id":                msg.MsgId,
		"queue_id":          queueID,
		"queue_offset":      msg.QueueOffset,
		"commit_log_offset": msg.CommitLogOffset,
		"reconsume_times":   msg.ReconsumeTimes,
		"props":             msg.GetProperties(),
		"born_ts":           msg.BornTimestamp,
		"store_ts":          msg.StoreTimestamp,
		"receive_ts":        nowMs(),
	}
}

func sent(result *primitive.SendResult) map[string]interface{} {
	queueID := -1
	if result.MessageQueue != nil {
		queueID = result.MessageQueue.QueueId
	}
	return map[string]interface{}{
		"status":        sendStatus(result.Status),
		"msg_id":        result.MsgID,
		"offset_msg_id": result.OffsetMsgID,
		"queue_id":      queueID,
		"queue_offset":  result.QueueOffset,
	}
}

func sendStatus(status primitive.SendStatus) string {
	switch status {
	case primitive.SendOK:
		return "SEND_OK"
	case primitive.SendFlushDiskTimeout:
		return "FLUSH_DISK_TIMEOUT"
	case primitive.SendFlushSlaveTimeout:
		return "FLUSH_SLAVE_TIMEOUT"
	case primitive.SendSlaveNotAvailable:
		return "SLAVE_NOT_AVAILABLE"
	}
	return "UNKNOWN_ERROR"
}

// message is message i of a run: must stay identical to `fields` in tests/interop/interop_harness.py.
func message(origin, topic string, i, shards int) *primitive.Message {
	repeat := 1
	if i%5 == 4 {
		repeat = 400 // ~12 KiB: above the 4 KiB where clients compress
	}
	body := ""
	for r := 0; r < repeat; r++ {
		body += fmt.Sprintf("héllo wörld 世界 🚀 %s #%d", origin, i)
	}
	msg := primitive.NewMessage(topic, []byte(body))
	msg.WithTag(fmt.Sprintf("tag%d", i%2))
	msg.WithKeys([]string{fmt.Sprintf("key-%s-%d", origin, i)})
	msg.WithProperty("color", "blue")
	msg.WithProperty("city", "Zürich")
	msg.WithProperty("seq", fmt.Sprintf("%d", i))
	msg.WithProperty("shard", fmt.Sprintf("%d", i%shards))
	msg.WithProperty("origin", origin)
	return msg
}
