# `make test` sets up everything from a fresh clone and runs every check; `make dev` runs kflare locally.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-16)
PYTEST_ARGS ?=

.PHONY: test venv test-bins lint types layers pytest chaos clean dev

test: lint types layers pytest

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $@

# Prints the directory of kube-apiserver, etcd, kubectl and helm as its last line; builds them on first use.
test-bins: venv
	PYTHON=$(abspath $(BIN)/python) bash hack/test-bins.sh

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

types: venv
	$(BIN)/mypy app webhooks reconcilers

layers: venv
	$(BIN)/lint-imports

pytest: venv
	bins=$$(PYTHON=$(abspath $(BIN)/python) bash hack/test-bins.sh | tail -n 1); \
	K8S_TEST_BIN="$$bins" $(BIN)/python -m pytest --ignore=tests/chaos $(PYTEST_ARGS)

# Breaks kflare on purpose (crashes, Cloudflare and Kubernetes faults, hostile input) at CI size and prints a table
# of what held; `bench/chaos.py` runs the same scenarios at full size.
chaos: venv
	bins=$$(PYTHON=$(abspath $(BIN)/python) bash hack/test-bins.sh | tail -n 1); \
	K8S_TEST_BIN="$$bins" $(BIN)/python -m pytest tests/chaos $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

# Runs kflare locally: a Kubernetes API server, the Cloudflare emulator and the controller, with examples/ applied.
dev: venv
	bins=$$(PYTHON=$(abspath $(BIN)/python) bash hack/test-bins.sh | tail -n 1); \
	$(BIN)/kflare dev --bin-dir "$$bins" $(DEV_ARGS)
