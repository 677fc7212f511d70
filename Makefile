# groupd — the two commands: `make run` and `make test`. Everything else is a convenience.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
HOST ?= 127.0.0.1
PORT ?= 9092
DATA ?= ./data

.PHONY: run test test-quick bench bench-quick bench-record bench-quick-record lint format clean wheel

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# setuptools ends every editable install of a package-dir mapping with a note that a folder named like
# the package in the working directory may shadow it; here that folder (./groupd) is the package itself,
# so the note is noise on a newcomer's first `make run` (tests/test_packaging.py installs with this).
# Likewise its note that `[tool.setuptools.ext-modules]` (storage/_native.c) is "experimental": the
# table is what setuptools documents for extensions declared in pyproject.toml.
QUIET_EDITABLE := PYTHONWARNINGS='ignore:Editable installation,ignore:`[tool.setuptools.ext-modules]`'

# The C extensions (*/_native.c, protocol/_wire.c) are built by the editable install: edited, they are built again.
$(VENV)/.base: $(VENV)/bin/python pyproject.toml $(wildcard */_native.c) protocol/_wire.c
	$(QUIET_EDITABLE) $(PIP) install -q -e .
	touch $@

$(VENV)/.dev: $(VENV)/.base
	$(QUIET_EDITABLE) $(PIP) install -q -e '.[dev]'
	touch $@

# kafkajs for the Node end-to-end tests (transactions), from the npm registry when npm is
# there; without it those tests are skipped with a note.
KAFKAJS_VERSION := 2.2.4
$(VENV)/node/node_modules/kafkajs/package.json: | $(VENV)/bin/python
	-command -v npm >/dev/null && npm install -s --no-audit --no-fund --prefix $(VENV)/node kafkajs@$(KAFKAJS_VERSION)

run: $(VENV)/.base
	$(VENV)/bin/groupd serve --host $(HOST) --port $(PORT) --data-dir $(DATA)

# The whole suite over pytest-xdist workers. Most of its time is spent waiting (on daemons starting,
# clients rebalancing, session timeouts, the Spark JVM), not computing, so twice as many workers as
# cores pays on a 2-core machine. --dist loadgroup: tests/conftest.py keeps the Spark tests on one
# worker (one JVM, one `groupd analyze` of the fixture history) and hands the long tests out first.
# PYTEST_ARGS adds options to either target, e.g. PYTEST_ARGS=--durations=50.
TEST_WORKERS ?= 4
test: $(VENV)/.dev $(VENV)/node/node_modules/kafkajs/package.json
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# The inner loop: the unit and property tests, without the end-to-end, real-client and Spark ones
# (markers e2e and spark, set in tests/conftest.py).
test-quick: $(VENV)/.dev
	$(PY) -m pytest -q -n 2 -m "not e2e and not spark" $(PYTEST_ARGS)

# bench.cluster_group: one broker vs three on a produce + consumer-group pipeline (add franz-go's
# own pipeline with FRANZ_GO_GOPATH=<a GOPATH holding franz-go v1.16>). bench.noread: what a
# client that never reads its answers costs the daemon.
bench: $(VENV)/.dev
	$(PY) -m bench.codec
	$(PY) -m bench.run
	$(PY) -m bench.analyze
	$(PY) -m bench.cluster_group
	$(PY) -m bench.noread

bench-quick: $(VENV)/.dev
	$(PY) -m bench.codec --quick
	$(PY) -m bench.run --quick
	$(PY) -m bench.analyze --quick
	$(PY) -m bench.cluster_group --quick
	$(PY) -m bench.noread --quick

# Each `bench.run` figure is printed with its ratio to the librdkafka mock of the same run and
# compared with the last ratios committed in bench/history.json (a drop of more than 15% says
# REGRESSION). Only these targets append to that file: commit it with the change that moved them.
bench-record: $(VENV)/.dev
	$(PY) -m bench.run --record

bench-quick-record: $(VENV)/.dev
	$(PY) -m bench.run --quick --record

lint: $(VENV)/.dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

wheel: $(VENV)/.dev
	$(PY) -m build --wheel --outdir dist .

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
