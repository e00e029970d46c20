#!/usr/bin/env bash
# `make run`: a local NameServer and broker pair on 127.0.0.1 with data under .data/, in the foreground.
# Ctrl-C stops both (gracefully: the broker unregisters and flushes its store). The servers run in
# their own sessions so that the terminal's SIGINT does not reach them besides our TERM: a second
# signal would make them skip the graceful part.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
mkdir -p .data/logs

pids=()
stop() {
    trap - INT TERM EXIT
    # Broker first, so it can still unregister from the NameServer.
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
        kill -TERM "${pids[i]}" 2>/dev/null || true
        while kill -0 "${pids[i]}" 2>/dev/null; do sleep 0.1; done
    done
}
trap stop INT TERM EXIT

wait_port() {  # wait until something listens on 127.0.0.1:$1, or the process $2 (logging to $3) died
    for _ in $(seq 1 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        if ! kill -0 "$2" 2>/dev/null; then
            echo "$(basename "$3" .log) exited before listening on port $1. The end of $3:" >&2
            tail -n 5 "$3" >&2
            return 1
        fi
        sleep 0.1
    done
    echo "nothing listens on port $1 after 10 s; see $3" >&2
    return 1
}

for port in 9876 10911 10912; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        echo "port $port on 127.0.0.1 is already in use (another NameServer or broker running?); stop it first" >&2
        exit 1
    fi
done

setsid "$BIN/mqnamesrv" -c conf/namesrv.properties > .data/logs/namesrv.log 2>&1 &
pids+=($!)
wait_port 9876 "${pids[0]}" .data/logs/namesrv.log
setsid "$BIN/mqbroker" -c conf/broker.conf > .data/logs/broker.log 2>&1 &
pids+=($!)
wait_port 10911 "${pids[1]}" .data/logs/broker.log

cat <<MSG
RocketCluster is running: NameServer 127.0.0.1:9876, broker broker-a 127.0.0.1:10911, data in .data/store
Logs: .data/logs/namesrv.log, .data/logs/broker.log

Send and receive a message from another shell:
  .venv/bin/mqadmin sendMessage -n 127.0.0.1:9876 -t TopicTest -p "hello rocketcluster" -c TagA -k key1
  .venv/bin/mqadmin consumeMessage -n 127.0.0.1:9876 -t TopicTest -g QuickstartGroup -c 1
  .venv/bin/mqadmin clusterList -n 127.0.0.1:9876

Ctrl-C stops both.
MSG
wait -n "${pids[@]}"
