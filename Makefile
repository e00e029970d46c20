# The two commands a new user needs: `make run` and `make test`. Both build the venv when missing.
# Debian's interpreter when there is one: the one the images run, and faster than a pyenv build (scripts/venv.sh)
PYTHON ?= $(firstword $(wildcard /usr/bin/python3.11) python3.11)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
SPARK_STAMP := $(VENV)/.installed-spark
DATA   := .data
# `make test`'s pytest processes, each running whole test files (most tests wait on real processes and sockets,
# so two share two cores well); TEST_WORKERS=0 runs everything in one process. A worker that dies ends the run
# at once: pytest-xdist's replacement worker can leave the run waiting for good
TEST_WORKERS ?= 2

.PHONY: run test lint fmt peers cpp-client-ssl system-deps bench clean crds

$(STAMP): pyproject.toml
	@bash scripts/venv.sh $(PYTHON) $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $(STAMP)

# The Spark data source's tests need pyspark and pyarrow (the `spark` extra), the operator's need kopf and pyyaml
# (the `operator` extra); `make run` needs neither.
$(SPARK_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[dev,spark,operator]'
	@touch $(SPARK_STAMP)

venv: $(STAMP)

# Real third-party RocketMQ clients (test peers), each in its own prefix under ~/.cache/rocketcluster.
peers:
	bash scripts/peers.sh

# The C++ client with TLS, built from a clone of apache/rocketmq-client-cpp's main branch (no published build has
# TLS): `make cpp-client-ssl ROCKETMQ_CPP_SRC=<clone>`. tests/interop/test_cpp_tls.py uses it when it is cached.
cpp-client-ssl:
	ROCKETMQ_CPP_SRC="$(ROCKETMQ_CPP_SRC)" bash scripts/cpp-client-ssl.sh

# Debian packages the tests use (iproute2, iptables, a Java runtime for Spark); a no-op when present.
system-deps:
	bash scripts/system-deps.sh

run: $(STAMP)
	bash scripts/run-local.sh

test: $(SPARK_STAMP) peers system-deps
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile --max-worker-restart=0 --durations=25

# mypy follows the operator's and the Spark source's imports (kopf, aiohttp, pyspark): lint needs every extra
lint: $(SPARK_STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache
	$(BIN)/ruff format --check .

fmt: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# The CRDs, generated from the operator's models, and the Helm chart's copy of them (tests/operator/test_crd.py
# and test_chart_files.py fail when they are stale).
crds: $(SPARK_STAMP)
	$(BIN)/python -m rocketcluster.crd --write
	cp crds/*.yaml charts/rocketcluster-operator/crds/

clean:
	rm -rf $(VENV) $(DATA)

-include e2e/k8s.mk
include bench/bench.mk
