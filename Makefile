# `make test` sets up everything from a fresh clone and runs every check; `make dev` runs kflare locally.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The venv is installed from the hash-pinned locks of requirements/, which `bash hack/lock.sh` makes from
# pyproject.toml: a change to either reinstalls it.
LOCKS := requirements/build.lock requirements/dev.lock requirements/run.lock
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml $(LOCKS) | sha256sum | cut -c1-16)
PYTEST_ARGS ?=
# pytest workers of `make pytest` and `make check`: one per core of a 2-core machine (a single worker leaves a core idle
# while the suite waits on the processes it starts); each worker starts its own control plane. Whole files go to one
# worker (`loadfile`), so a module's fixtures are set up once. `PYTEST_WORKERS=0` runs everything in one process.
PYTEST_WORKERS ?= 2

.PHONY: test check venv test-bins node-bins lint types layers unit pytest chaos e2e conformance clean dev

test: lint types layers pytest

# The quick loop: lint, types, layers and the unit tests (no API server), side by side (each target's output is
# printed whole when it ends). Python writes its bytecode, and pytest its rewritten test modules, even where the
# environment says not to (PYTHONDONTWRITEBYTECODE, as in the image): compiling every module again in each pytest
# worker and each process a test starts costs more than the tests themselves.
check unit: export PYTHONDONTWRITEBYTECODE :=
check: venv
	$(MAKE) --no-print-directory -j 4 --output-sync=target lint types layers unit

unit: venv
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile tests/unit -q $(PYTEST_ARGS)

venv: $(STAMP)

# pip, setuptools and wheel first, so that installing kflare itself (editable, without build isolation) fetches no
# unpinned build backend: everything but kflare comes from the locks, checked against their hashes.
$(STAMP): pyproject.toml $(LOCKS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --require-hashes -r requirements/build.lock
	$(BIN)/python -m pip install --quiet --require-hashes -r requirements/dev.lock
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	rm -f $(VENV)/.installed-*
	touch $@

# Prints the directory of kube-apiserver, etcd, kubectl and helm as its last line; builds them on first use.
test-bins: venv
	PYTHON=$(abspath $(BIN)/python) bash hack/test-bins.sh

# Prints the directory of the node's binaries (kubelet and the rest of a one-node cluster); builds them on first use.
node-bins: venv
	PYTHON=$(abspath $(BIN)/python) bash hack/test-bins.sh node

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

types: venv
	$(BIN)/mypy app webhooks reconcilers

layers: venv
	$(BIN)/lint-imports

pytest: venv
	bins=$$(PYTHON=$(abspath $(BIN)/python) bash hack/test-bins.sh | tail -n 1); \
	K8S_TEST_BIN="$$bins" $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile \
		--ignore=tests/chaos --ignore=tests/e2e $(PYTEST_ARGS)

# Breaks kflare on purpose (crashes, Cloudflare and Kubernetes faults, hostile input) at CI size and prints a table
# of what held; `bench/chaos.py` runs the same scenarios at full size.
chaos: venv
	bins=$$(PYTHON=$(abspath $(BIN)/python) bash hack/test-bins.sh | tail -n 1); \
	K8S_TEST_BIN="$$bins" $(BIN)/python -m pytest tests/chaos $(PYTEST_ARGS)

# A one-node cluster (kubelet, containerd, CNI, kube-proxy) with the locally built image: the chart installed and
# running as a user runs it. Needs root (a bridge, iptables, mounts); one run at a time per machine.
e2e: venv
	bins=$$(PYTHON=$(abspath $(BIN)/python) bash hack/test-bins.sh | tail -n 1); \
	node=$$(PYTHON=$(abspath $(BIN)/python) bash hack/test-bins.sh node | tail -n 1); \
	gateway=$$(PYTHON=$(abspath $(BIN)/python) bash hack/gateway-e2e.sh | tail -n 1); \
	K8S_TEST_BIN="$$bins" K8S_NODE_BIN="$$node" K8S_GATEWAY_BIN="$$gateway" \
		$(BIN)/python -m pytest tests/e2e --ignore=tests/e2e/test_conformance.py $(PYTEST_ARGS)

# The upstream Gateway API conformance suite against the class on the one-node cluster (tests/e2e/test_conformance.py),
# every Gateway with a data plane of its own; it fails unless every profile passes, and writes its report to
# docs/conformance/ (the committed report is this run's output: `git diff` shows what changed). Run by .ci/run.
conformance: venv
	bins=$$(PYTHON=$(abspath $(BIN)/python) bash hack/test-bins.sh | tail -n 1); \
	node=$$(PYTHON=$(abspath $(BIN)/python) bash hack/test-bins.sh node | tail -n 1); \
	gateway=$$(PYTHON=$(abspath $(BIN)/python) bash hack/gateway-e2e.sh suite | tail -n 1); \
	K8S_TEST_BIN="$$bins" K8S_NODE_BIN="$$node" K8S_GATEWAY_BIN="$$gateway" \
		CONFORMANCE_REPORT=$(abspath docs/conformance/kflare-report.yaml) \
		$(BIN)/python -m pytest tests/e2e/test_conformance.py -s $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

# Runs kflare locally: a Kubernetes API server, the Cloudflare emulator and the controller, with examples/ applied.
dev: venv
	bins=$$(PYTHON=$(abspath $(BIN)/python) bash hack/test-bins.sh | tail -n 1); \
	$(BIN)/kflare dev --bin-dir "$$bins" $(DEV_ARGS)
