# Two commands do all the set-up on a fresh machine: `make run` (the app) and `make test` (the suite).
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup system-deps run test test-fast lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	$(BIN)/pip install -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

# Debian packages the browser and desktop tests need (Chromium for Playwright, Xvfb for the desktop window).
system-deps:
	@missing=""; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v Xvfb >/dev/null 2>&1 || missing="$$missing xvfb"; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq $$missing; \
	fi

run: setup
	$(BIN)/metagen ui

# pytest exit code 5 means "no tests collected": a broken collection must not pass as green.
test: setup system-deps
	@$(BIN)/python -m pytest -q -rs; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests (exit 5): treating as a failure"; fi; \
	exit $$rc

test-fast: setup
	$(BIN)/python -m pytest -q -m "not model and not e2e"

lint: setup
	$(BIN)/ruff check .

bench: setup
	$(BIN)/python benchmarks/bench_scheduler.py
	$(BIN)/python benchmarks/bench_engine.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache test-artifacts
