# The two commands: `make run` and `make test`. Both build .venv from nothing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

.PHONY: run test lint prometheus chromium bench fuzz clean

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

# $(call apt_install,PROGRAM,PACKAGE,TESTS): Debian's PACKAGE, installed when PROGRAM is missing (apt-get update
# only when the install alone fails; sudo only when not root and sudo exists).
define apt_install
	@command -v $(1) >/dev/null 2>&1 || { \
	  sudo=; if [ "$$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then sudo=sudo; fi; \
	  apt="env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(2)"; \
	  echo "installing Debian's $(2) (apt-get) for $(3)"; \
	  $$sudo $$apt >/dev/null 2>&1 || \
	  { $$sudo apt-get update -qq >/dev/null && $$sudo $$apt >/dev/null; } || \
	  { echo "could not install $(2): run apt-get install $(2) as root, then make test"; exit 1; }; }
endef

# tests/test_prometheus.py runs a real Prometheus: Debian's package.
prometheus:
	$(call apt_install,prometheus,prometheus,tests/test_prometheus.py)

# tests/test_web.py drives the page in headless Chromium through Playwright: Debian's chromium (Playwright's own
# browser download is not used).
chromium:
	$(call apt_install,chromium,chromium,tests/test_web.py)

# pytest exits 5 when it collects no test: that is a failure here, not a pass.
# The fuzzers also run here, briefly (25 examples each), so that they cannot rot between `make fuzz` runs.
test: lint prometheus chromium
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
