# fedsweep: the two contract commands are `make install` and `make test`.
PYTHON ?= python3
PIP ?= $(PYTHON) -m pip
export RAY_USAGE_STATS_ENABLED := 0
export MLFLOW_DISABLE_TELEMETRY := true

.PHONY: install test test-fast lint format bench bench-peers ui clean reproduce-figures docs team-up team-down
PROFILE ?= quick

install:  ## install fedsweep and its pinned dependencies (CPU torch), plus dev tools
	$(PIP) install torch==2.13.0
	$(PIP) install -e ".[dev,docs,team]"
	@# the compiled kernels and the MLflow schema template, built once here instead of by the first
	@# run (or by every first Ray worker of a sweep at once): fedsweep/warmup.py
	$(PYTHON) -m fedsweep.warmup
	@# PNG export (kaleido) needs a Chromium; best effort, figures still get HTML without it
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && \
	    apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } || \
	  echo "note: no Chromium found or installed; figures will be written as HTML only"

# The suite's files run side by side, one pytest worker per core (at most 4: each end-to-end
# test starts its own Ray), a file's tests on one worker (they share its module fixtures), the
# longest files first (tests/conftest.py orders them); TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= $(shell $(PYTHON) -c "import os; print(min(4, len(os.sched_getaffinity(0))))")
PYTEST_PARALLEL = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)
# The tests write Python's bytecode caches (__pycache__, ignored by git) even where the
# environment says not to (PYTHONDONTWRITEBYTECODE, set on some images): without them every
# pytest worker rewrites every test module's asserts again (collecting the suite: 14.4 CPU-s,
# 9.4 with the caches), and every Python process of the suite compiles fedsweep's modules again.
TEST_ENV = PYTHONDONTWRITEBYTECODE=

test:  ## the whole test suite (uses real data when FEDSWEEP_DATA_DIR is set)
	$(TEST_ENV) $(PYTHON) -m pytest -q $(PYTEST_PARALLEL) --durations=30 tests

test-fast:  ## the suite without the slow end-to-end Ray Tune / MLflow tests
	$(TEST_ENV) $(PYTHON) -m pytest -q $(PYTEST_PARALLEL) -m "not slow" tests

lint:
	$(PYTHON) -m ruff check fedsweep dashboards tests
	$(PYTHON) -m ruff format --check fedsweep dashboards tests

format:
	$(PYTHON) -m ruff format fedsweep dashboards tests
	$(PYTHON) -m ruff check --fix fedsweep dashboards tests

BENCH_ARGS ?=
bench:  ## µs per local step vs the machine's limits, overheads, ResNet-18 step, sweep overhead (BENCH_ARGS=--json)
	$(PYTHON) -m fedsweep.bench $(BENCH_ARGS)

# Flower's simulation in its own venv (flwr[simulation] pins another Ray); reinstalled only when
# requirements.txt changes (the stamp file records the last install).
PEERS_VENV ?= .venv-peers
PEERS_ARGS ?=
$(PEERS_VENV)/.installed: benchmarks/peers/requirements.txt
	test -x $(PEERS_VENV)/bin/python || python3 -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/python -m pip install -q -r benchmarks/peers/requirements.txt
	$(PEERS_VENV)/bin/python -m pip install -q --no-deps -e .
	touch $@

bench-peers: $(PEERS_VENV)/.installed  ## s/round: fedsweep vs Flower's simulation, same FedAvg workload (PEERS_ARGS="--models svm --rounds 3 --json")
	$(PYTHON) benchmarks/peers/run_peers.py --venv $(PEERS_VENV) $(PEERS_ARGS)

reproduce-figures:  ## every runnable sweep (PROFILE=quick|paper|smoke), every figure, the reproduction reports
	$(PYTHON) -m fedsweep.cli.main sweep --profile $(PROFILE)
	$(PYTHON) -m fedsweep.cli.main figures --profile $(PROFILE) --out figures/$(PROFILE)
	$(PYTHON) -m fedsweep.cli.main report --profile $(PROFILE) --out figures/$(PROFILE)/reproduction

TEAM_ARGS ?=
team-up:  ## PostgreSQL + an MLflow server on it + a Ray head on this machine; prints what to export (TEAM_ARGS="--host 10.0.0.5")
	$(PYTHON) -m fedsweep.cli.main team up $(TEAM_ARGS)

team-down:  ## stop what team-up started (the data stays in ~/.fedsweep/team)
	$(PYTHON) -m fedsweep.cli.main team down

docs:  ## the docs site in site/: the generated references (config keys, CLI), then mkdocs build --strict
	$(PYTHON) docs/gen_reference.py
	NO_MKDOCS_2_WARNING=1 $(PYTHON) -m mkdocs build --strict

ui:  ## MLflow UI on 127.0.0.1:5000 for the project's store (./mlruns)
	$(PYTHON) -m fedsweep.cli.main ui

clean:
	rm -rf .pytest_cache .ruff_cache build *.egg-info site
