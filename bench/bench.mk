# Benchmarks (docs/benchmarks.md says how to read them). Included by the top-level Makefile.
#   make bench                        the store and the broker, short runs (a quick look, not a result)
#   make bench-<name> [ARGS="..."]    one benchmark with its own options: store broker net namesrv ha memory
#                                     spark codec index sendpath timer hostspeed consume
#                                     (python -m bench.<name> --help)
#   make bench-put-ab BASE=<rev>      the put path of <rev> against the working tree, in one process
#   make bench-vs-rocketmq [ARGS=...] ours beside Apache RocketMQ (fetched by scripts/reference-rocketmq.sh),
#                                     the same Java client; minutes per round: a quiet machine's job
#   make bench-vs-grpc [ARGS=...]     our gRPC endpoint beside Apache RocketMQ's proxy in local mode, driven by
#                                     the Java 5.x SDK and the official Python SDK (python -m bench.vs_grpc)
#   make bench-cost-growth [ARGS=...] both brokers' throughput and CPU per message against body size, topics
#                                     and consumer groups, or a memory soak (ARGS="soak"); plots need the
#                                     bench extra (matplotlib), which this target installs
ARGS ?=
BASE ?=
BENCHES := store broker net namesrv ha memory spark codec index sendpath timer hostspeed consume

.PHONY: bench bench-put-ab bench-vs-rocketmq bench-vs-grpc bench-cost-growth $(addprefix bench-,$(BENCHES))

BENCH_STAMP := $(VENV)/.installed-bench

bench: $(STAMP)
	$(BIN)/python -m bench.store --seconds 1 --recovery-mib 256
	$(BIN)/python -m bench.broker --num 50000 --sync-num 1000

# The Spark benchmark needs the spark extra; the others run on the dev install.
bench-spark: $(SPARK_STAMP)
	$(BIN)/python -m bench.spark $(ARGS)

$(addprefix bench-,$(filter-out spark,$(BENCHES))): bench-%: $(STAMP)
	$(BIN)/python -m bench.$* $(ARGS)

# The base tree is exported with git archive (no worktree left behind) under .data/, which git ignores.
bench-put-ab: $(STAMP)
	@test -n "$(BASE)" || { echo "usage: make bench-put-ab BASE=<git revision> [ARGS='--rounds 200']"; exit 2; }
	rm -rf $(DATA)/put-ab-base && mkdir -p $(DATA)/put-ab-base
	git archive $(BASE) | tar -x -C $(DATA)/put-ab-base
	$(BIN)/python -m bench.put_ab $(DATA)/put-ab-base . $(ARGS)

# Needs java, javac and mvn (scripts/peers.sh java installs them); never part of `make test` or CI.
bench-vs-rocketmq: $(STAMP)
	$(BIN)/python -m bench.vs_rocketmq $(ARGS)

# The official Python SDK comes with the dev install (its grpc extra); fetches the proxy's jars and the Java gRPC client.
bench-vs-grpc: $(STAMP)
	$(BIN)/python -m bench.vs_grpc $(ARGS)

$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[dev,bench]'
	@touch $(BENCH_STAMP)

bench-cost-growth: $(BENCH_STAMP)
	$(BIN)/python -m bench.cost_growth $(ARGS)
