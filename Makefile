# The two commands a new user needs: `make run` and `make test`. Both build the venv when missing.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DATA   := .data

.PHONY: run test lint fmt peers netns-deps bench clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

# Real third-party RocketMQ clients (test peers), each in its own prefix under ~/.cache/rocketcluster.
peers:
	bash scripts/peers.sh

# iproute2 and iptables for the HA fault tests (network namespaces); a no-op when present.
netns-deps:
	bash scripts/ha-netns-deps.sh

run: $(STAMP)
	bash scripts/run-local.sh

test: $(STAMP) peers netns-deps
	$(BIN)/ruff check .
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

fmt: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf $(VENV) $(DATA)

-include e2e/k8s.mk
-include bench/bench.mk
