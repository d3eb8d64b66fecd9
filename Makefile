# The two commands: `make run` and `make test`. Both build .venv from nothing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

.PHONY: run test lint prometheus bench fuzz clean

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

# tests/test_prometheus.py runs a real Prometheus: Debian's package, installed here when the binary is
# missing (apt-get update only when the install alone fails; sudo only when not root and sudo exists).
APT_INSTALL := env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus
prometheus:
	@command -v prometheus >/dev/null 2>&1 || { \
	  sudo=; if [ "$$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then sudo=sudo; fi; \
	  echo "installing Debian's prometheus (apt-get) for tests/test_prometheus.py"; \
	  $$sudo $(APT_INSTALL) >/dev/null 2>&1 || \
	  { $$sudo apt-get update -qq >/dev/null && $$sudo $(APT_INSTALL) >/dev/null; } || \
	  { echo "could not install prometheus: run apt-get install prometheus as root, then make test"; exit 1; }; }

# pytest exits 5 when it collects no test: that is a failure here, not a pass.
# The fuzzers also run here, briefly (25 examples each), so that they cannot rot between `make fuzz` runs.
test: lint prometheus
	$(BIN)/python -m pytest; rc=$$?; if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; exit 1; fi; [ $$rc -eq 0 ] || exit $$rc
	KVBUDGET_FUZZ_EXAMPLES=25 $(BIN)/python -m pytest tests/fuzz -m fuzz

# Every benchmarks/bench_*.py, each printing medians of several runs against its target.
bench: $(TEST_STAMP)
	@set -e; for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b; done

# Coverage-guided property fuzzing of every reader for a fixed budget (FUZZ_EXAMPLES per reader).
FUZZ_EXAMPLES ?= 2000
fuzz: $(TEST_STAMP)
	KVBUDGET_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest tests/fuzz -m fuzz -q -p no:randomly

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
