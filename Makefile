# Two entry points for a fresh machine: `make demo` (the main job) and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install demo test lint bench clean

install: $(BIN)/generic-framework

$(BIN)/generic-framework: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

demo: $(BIN)/generic-framework
	$(BIN)/generic-framework chat "// what's the weather in Nanaimo?"

test: $(BIN)/generic-framework
	$(BIN)/python -m pytest

lint: $(BIN)/generic-framework
	$(BIN)/ruff check generic_framework tests benchmarks
	$(BIN)/ruff format --check generic_framework tests benchmarks
	$(BIN)/mypy --strict generic_framework

bench: $(BIN)/generic-framework
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) .venv-ci .pytest_cache .mypy_cache .ruff_cache
