# Two commands: `make demo` (the main job) and `make test` (the full suite). Both create .venv
# if missing and install the package with its compiled extensions first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SOURCES := $(wildcard pyproject.toml setup.py render/*.pyx)

.PHONY: demo test install bench clean chromium

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(PY) $(SOURCES)
	$(PY) -m pip install --upgrade pip "setuptools>=68" wheel "cython>=3.0" "numpy>=1.26"
	$(PY) -m pip install --no-build-isolation -e ".[test,ray,hf,openenv]"
	# Compile every task's Numba kernels once, in parallel (about 45 s on 2 cores), into the
	# on-disk cache, so the first `make demo` or test starts warm.
	$(PY) -m visgym.bridges.cli warmup
	touch $(STAMP)

install: $(STAMP)

# The main job, offline: the solver agent through the evaluation loop on every implemented task
# and both splits, 10 episodes each; results (episodes.jsonl, summary.md/csv, success.png, GIFs
# of the first 2 episodes of each task and split) in results/demo. Sized to stay under a minute
# on 2 cores once the kernels are compiled: the GIFs are most of the cost (0.1-0.3 s each against
# ~0.01-0.1 s per episode), so 2 per task and split instead of all 10 (15 s instead of 38 s of
# CPU for 7 families). The first run also compiles the Numba kernels, and says so.
demo: $(STAMP)
	rm -rf results/demo
	$(PY) -m visgym.bridges.cli eval --split all --episodes 10 --gifs 2 --out results/demo

# The HTML report's browser tests (tests/test_html_report.py) need a headless Chromium: the
# distribution's package is installed when no Chromium is on PATH (Debian/Ubuntu: `chromium`,
# as root or through passwordless sudo). Where that cannot be done the tests skip, naming the
# package, except under CI, where they fail.
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  if command -v apt-get >/dev/null 2>&1; then \
	    if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO="sudo -n"; fi; \
	    echo "make: installing the chromium package for the HTML report tests"; \
	    { $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; } \
	      || echo "make: could not install chromium; the HTML report's browser tests will skip (fail under CI)"; \
	  else echo "make: no apt-get here; install Chromium for the HTML report's browser tests"; fi; }

test: $(STAMP) chromium
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) -m visgym.bench step --env maze_2d/easy --batch 1,16,256,1024

clean:
	rm -rf $(VENV) build *.egg-info results
	find . -name '*.so' -delete
	find . -name '__pycache__' -type d -prune -exec rm -rf {} +
