# The two commands: `make run` and `make test`. Both build .venv from nothing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

.PHONY: run test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(TEST_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@ $(STAMP)

run: $(STAMP)
	$(BIN)/kvbudget fit meta-llama/Llama-3.1-8B-Instruct --gpu H100 --context 8192 --batch 32
	@echo
	$(BIN)/kvbudget kv meta-llama/Llama-3.1-8B-Instruct --context 8192 --batch 32

lint: $(TEST_STAMP)
	$(BIN)/ruff check src tests benchmarks tools
	$(BIN)/mypy

# pytest exits 5 when it collects no test: that is a failure here, not a pass.
test: lint
	$(BIN)/python -m pytest; rc=$$?; if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; exit 1; fi; exit $$rc

bench: $(TEST_STAMP)
	$(BIN)/python benchmarks/bench_startup.py
	$(BIN)/python benchmarks/bench_safetensors.py
	$(BIN)/python benchmarks/bench_plan.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
