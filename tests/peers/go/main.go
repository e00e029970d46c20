// Interop driver for Apache RocketMQ's Go client (github.com/apache/rocketmq-client-go/v2, unchanged,
// from the Go module proxy), run by tests/interop against our NameServer and broker. The first
// argument picks the role: produce, consume, pull, transact, request or respond (see each file). Every
// result is one JSON line on stdout; the exit code is 0 when the role finished, 3 on its timeout.
package main

import (
	"fmt"
	"os"

	"github.com/apache/rocketmq-client-go/v2/rlog"
)

func main() {
	rlog.SetLogLevel("error")
	a, err := parseArgs(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	roles := map[string]func(*args) int{
		"produce":  produce,
		"consume":  consume,
		"pull":     pull,
		"transact": transact,
		"request":  request,
		"respond":  respond,
	}
	role, ok := roles[a.command]
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown command %s\n", a.command)
		os.Exit(2)
	}
	os.Exit(role(a))
}
