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
	$(BIN)/pip install -e '.[dev,desktop,notebook]'
	touch $(STAMP)

# GPU builds of llama.cpp: METAGEN_GPU=cuda|vulkan|metal, or cuda when nvcc is on PATH and an NVIDIA driver sees a
# GPU (a CUDA toolkit alone, on a machine without a GPU, would build a llama.cpp that cannot load); METAGEN_GPU=cpu
# or no GPU: the CPU build as is.
METAGEN_GPU ?= $(if $(and $(shell command -v nvcc 2>/dev/null),$(shell nvidia-smi -L 2>/dev/null)),cuda,)
GPU_CMAKE_cuda := -DGGML_CUDA=on
GPU_CMAKE_vulkan := -DGGML_VULKAN=on
GPU_CMAKE_metal := -DGGML_METAL=on
GPU_STAMP := $(VENV)/.gpu-$(METAGEN_GPU)-stamp

$(GPU_STAMP): $(STAMP)
	@[ -n "$(GPU_CMAKE_$(METAGEN_GPU))" ] || { echo "METAGEN_GPU=$(METAGEN_GPU): use cuda, vulkan or metal"; exit 2; }
	CMAKE_ARGS="$(GPU_CMAKE_$(METAGEN_GPU))" $(BIN)/pip install --force-reinstall --no-deps --no-cache-dir \
	  "llama-cpp-python==$$($(BIN)/python -c 'import importlib.metadata as m; print(m.version("llama-cpp-python"))')"
	$(BIN)/python -m app.cli models list | head -1  # says which build runs now (CPU / CUDA / Vulkan / Metal)
	touch $@

setup: $(STAMP) $(if $(filter-out cpu,$(METAGEN_GPU)),$(GPU_STAMP))

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

run: setup
	$(BIN)/metagen ui

# pytest exit code 5 means "no tests collected": a broken collection must not pass as green.
test: setup system-deps
	@$(BIN)/python -m pytest -q -rs --durations=25; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests (exit 5): treating as a failure"; fi; \
	exit $$rc

test-fast: setup
	$(BIN)/python -m pytest -q -m "not model and not e2e"

lint: setup
	$(BIN)/ruff check .

bench: setup
	$(BIN)/pip install -q -e '.[bench]'  # llama-cpp-python's own server, the baseline of bench_serve.py
	$(BIN)/python benchmarks/bench_scheduler.py
	$(BIN)/python benchmarks/bench_engine.py
	$(BIN)/python benchmarks/bench_batch_scaling.py
	$(BIN)/python benchmarks/bench_eval.py
	$(BIN)/python benchmarks/bench_serve.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache test-artifacts
