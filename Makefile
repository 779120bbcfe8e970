# Two commands do all the set-up on a fresh machine: `make run` (the app) and `make test` (the suite).
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup system-deps agents run test test-fast lint bench clean

# llama-cpp-python is built by scripts/build_engine.py before the app is installed (so pip never builds or reuses a
# wheel of other flags): without llama.cpp's AMX kernels unless METAGEN_AMX=1, GPU backends by METAGEN_GPU=cuda|vulkan|
# metal (cuda when nvcc is on PATH and a driver sees a GPU), the wheel kept under a hash of its flags and the CPU.
# `setup` ends with a canary decode of the bundled model in a child process: a crash or garbage fails the setup
# (after one portable rebuild when the flags were chosen automatically).
$(STAMP): pyproject.toml scripts/build_engine.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	$(BIN)/python scripts/build_engine.py --no-canary
	$(BIN)/pip install -e '.[dev,desktop,notebook]'
	$(BIN)/pip install --no-deps bfcl-eval==2026.3.23  # BFCL's data and checker only: its own deps are every vendor SDK
	touch $(STAMP)

setup: $(STAMP)
	$(BIN)/python scripts/build_engine.py

# Debian packages the browser and desktop tests need: Chromium for Playwright, Xvfb and the X/Qt
# libraries for the native desktop window (pywebview + QtWebEngine).
DEBIAN_PACKAGES := bubblewrap chromium xvfb libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-image0 \
	libxcb-render-util0 libxcb-randr0 libxcb-shape0 libxcb-xkb1 libxkbcommon-x11-0 libxcomposite1 \
	libxdamage1 libxrandr2 libxtst6 libxkbfile1 libnss3 libasound2 libegl1 libgl1 libgbm1 \
	libfontconfig1 libdbus-1-3

system-deps:
	@missing=$$(for p in $(DEBIAN_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || printf '%s ' $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages: $$missing"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq $$missing; \
	fi

# The real agent clients of tests/agents/ (Codex CLI, Claude Code), pinned in .agents/package.json and its lock, installed
# by `npm ci` into .agents/node_modules (git-ignored). Their native binaries come from the registry as optional
# dependencies of the same packages: nothing is downloaded when they run. Node and npm come from Debian's packages when
# this machine has no npm at all (a NodeSource nodejs ships its own npm and conflicts with Debian's `npm`).
AGENTS_STAMP := .agents/node_modules/.installed-stamp
$(AGENTS_STAMP): .agents/package.json .agents/package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "installing Debian packages: nodejs npm"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq nodejs npm; }
	@node -e 'const m=+process.versions.node.split(".")[0]; if (m<18) { console.error("Node.js "+process.versions.node+" is too old for the agent clients (need >= 18)"); process.exit(1) }'
	cd .agents && npm ci --no-audit --no-fund --loglevel=error
	.agents/node_modules/.bin/codex --version
	.agents/node_modules/.bin/claude --version
	touch $(AGENTS_STAMP)

agents: $(AGENTS_STAMP)

run: setup
	$(BIN)/metagen ui

# pytest exit code 5 means "no tests collected": a broken collection must not pass as green.
# Two pytest-xdist workers, a test module (with its module fixtures) on one of them, each pinned to its share of the
# cores (tests/conftest.py); TEST_WORKERS=0 runs the suite in one process. Tests marked `serial` run after, alone.
TEST_WORKERS ?= 2
test: setup system-deps agents
	@$(BIN)/python -m pytest -q -rs --durations=25 -n $(TEST_WORKERS) --dist loadfile -m "not serial"; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests (exit 5): treating as a failure"; fi; \
	$(BIN)/python -m pytest -q -rs -m serial; serial=$$?; \
	if [ $$serial -eq 5 ]; then echo "pytest collected no serial tests (exit 5): treating as a failure"; fi; \
	[ $$rc -eq 0 ] && [ $$serial -eq 0 ]

test-fast: setup
	$(BIN)/python -m pytest -q -m "not model and not e2e and not agents" -n $(TEST_WORKERS) --dist loadfile

lint: setup
	$(BIN)/ruff check .

bench: setup
	$(BIN)/pip install -q -e '.[bench]'  # llama-cpp-python's own server, the baseline of bench_serve.py
	$(BIN)/python benchmarks/bench_scheduler.py
	$(BIN)/python benchmarks/bench_engine.py
	$(BIN)/python benchmarks/bench_batch_scaling.py
	$(BIN)/python benchmarks/bench_eval.py
	$(BIN)/python benchmarks/bench_serve.py
	$(BIN)/python benchmarks/bench_tools.py
	$(BIN)/python benchmarks/bench_versions.py
	$(BIN)/python benchmarks/bench_replay.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache test-artifacts .agents/node_modules
