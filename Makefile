# Two entry points for a fresh machine: `make demo` (the main job) and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install install-dev demo test lint k8s-check multinode bench scale-load env clean

# The demo needs only the runtime dependencies; tests and lint need the dev extra too.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

# The benchmark harness imports the peer libraries it measures: running it, and type-checking
# it, needs the bench extra.
$(VENV)/.installed-bench: $(VENV)/.installed-dev
	$(BIN)/python -m pip install -q -e '.[dev,bench]'
	touch $@

install: $(VENV)/.installed

install-dev: $(VENV)/.installed-dev

demo: $(VENV)/.installed
	$(BIN)/generic-framework chat "// what's the weather in Nanaimo?"

test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest

lint: $(VENV)/.installed-bench
	$(BIN)/ruff check generic_framework tests benchmarks
	$(BIN)/ruff format --check generic_framework tests benchmarks
	$(BIN)/mypy --strict generic_framework benchmarks

# The Kubernetes manifests against the API's schemas (strict: unknown fields fail), offline:
# kubernetes-validate ships the schemas. Validated, not run here (docs/several-machines.md).
K8S_VERSION ?= 1.31.0
k8s-check: $(VENV)/.installed-dev
	$(BIN)/kubernetes-validate --strict --quiet -k $(K8S_VERSION) deploy/kubernetes/*.yaml

# Two Docker engines as a two-node Swarm on this machine, the stack across both under faults and
# a rolling upgrade (scripts/multinode.sh; needs root and a running engine; not part of CI).
multinode: $(VENV)/.installed
	PYTHON=$(abspath $(BIN))/python bash scripts/multinode.sh

bench: $(VENV)/.installed-bench
	$(BIN)/python -m benchmarks

# Three replicas on one throwaway PostgreSQL (Debian's postgresql package) and the mock, full size.
scale-load: $(VENV)/.installed-dev
	$(BIN)/python tests/reliability/scale_load.py --conversations 200 --turns 5

# Set values in .env in place, one line per key: `make env BOT_API_TOKEN=generate KEY=VALUE ...`
# (scripts/env.py). The command-line variables reach the script through its environment, by name
# only, so no value shows in a process list; ENV_FILE picks another file.
ENV_FILE ?= .env
ENV_KEYS = $(foreach v,$(.VARIABLES),$(if $(filter command line,$(origin $(v))),$(v)))

env: $(VENV)/.installed
	@$(BIN)/python scripts/env.py --file "$(ENV_FILE)" $(filter-out PYTHON VENV ENV_FILE,$(ENV_KEYS))

clean:
	rm -rf $(VENV) .venv-ci .pytest_cache .mypy_cache .ruff_cache
