# Two commands do everything on a fresh clone: `make demo` and `make test`.
# Both bootstrap themselves: uv (from PyPI) into .tools/, the locked stack into .venv/,
# the Airflow home into .airflow/ with its SQLite database migrated.
SHELL := /bin/bash
PY_BOOT ?= python3
UV_VERSION := 0.13.8
UV := .tools/uv/bin/uv
VENV := .venv
PY := $(VENV)/bin/python
export AIRFLOW_HOME := $(CURDIR)/.airflow
export AIRFLOW_CONFIG := $(CURDIR)/airflow.cfg
export KMIGRATE_PROJECT_ROOT := $(CURDIR)
export PYSPARK_PYTHON := $(CURDIR)/$(VENV)/bin/python
export PYSPARK_DRIVER_PYTHON := $(CURDIR)/$(VENV)/bin/python
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
# kmigrate's home (docs/operations.md, "Where state lives") is the user's ($KMIGRATE_HOME, else
# $XDG_STATE_HOME/kmigrate); the demo keeps its own (out/demo). Tests and benchmarks pin theirs
# with KMIGRATE_OUT or KMIGRATE_HOME per test: an inherited KMIGRATE_HOME is cleared (empty is
# unset), and state a test leaves to the default home lands in out/test-state, not in ~/.local.
test fuzz bench: export KMIGRATE_HOME :=
test fuzz: export XDG_STATE_HOME := $(CURDIR)/out/test-state

.PHONY: all venv airflow-home kafka-tools system-tools test imports types demo ui bench lint clean schemas fuzz

all: test

$(UV):
	$(PY_BOOT) -m pip install --quiet --disable-pip-version-check --target .tools/uv uv==$(UV_VERSION)

# The compiled record core (setup.py) is rebuilt by uv when its sources change (pyproject.toml
# [tool.uv] cache-keys); the last line says which core is active (python: the compiler is missing).
CORE_SOURCES := setup.py migration/formats/layout.py $(wildcard migration/formats/*.pyx migration/formats/*.pxd migration/migrations/upgrade/*.pyx migration/formats/_cvendor/*)
$(VENV)/.synced: uv.lock pyproject.toml $(CORE_SOURCES) | $(UV)
	$(UV) sync --frozen --quiet
	$(PY) -m migration.formats.core
	touch $@

venv: $(VENV)/.synced

# Airflow reads airflow.cfg from the project; the home holds its SQLite db and logs.
$(AIRFLOW_HOME)/.migrated: $(VENV)/.synced airflow.cfg
	mkdir -p $(AIRFLOW_HOME)
	$(VENV)/bin/airflow db migrate > $(AIRFLOW_HOME)/db-migrate.log 2>&1 || { tail -30 $(AIRFLOW_HOME)/db-migrate.log; exit 1; }
	touch $@

airflow-home: $(AIRFLOW_HOME)/.migrated

# The real Apache Kafka that judges the migrations (docs/testing.md, "Apache Kafka as the judge"):
# one committed POM per version (tools/kafka/<version>/pom.xml), resolved from Maven Central
# into .tools/kafka/<version>/lib once; afterwards a no-op (tools/kafka/fetch.sh says how).
KAFKA_VERSIONS := $(sort $(patsubst tools/kafka/%/pom.xml,%,$(wildcard tools/kafka/*/pom.xml)))
kafka-tools:
	@for v in $(KAFKA_VERSIONS); do tools/kafka/fetch.sh $$v || exit 1; done

# Debian packages the tests drive (headless Chromium for the report pages, strace for the
# power-loss test): installed with apt-get when one is missing (as root, as on the project's
# machines and CI), a no-op when all are there. Elsewhere it names what to install and stops.
SYSTEM_TOOLS := /usr/bin/chromium:chromium /usr/bin/strace:strace
system-tools:
	@missing=""; for t in $(SYSTEM_TOOLS); do [ -x "$${t%%:*}" ] || missing="$$missing $${t#*:}"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "make system-tools: install$$missing (apt-get, as root)"; exit 1; fi; \
	  echo "installing$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq >/dev/null && apt-get install -y -qq$$missing >/dev/null || exit 1; \
	fi

# The import contract (pyproject.toml [tool.importlinter]: the layers of docs/architecture.md)
# and mypy (pyproject.toml [tool.mypy]: the package, strict on formats/ and logdir/) run first:
# a violation or a type error fails the suite.
# Two pytest-xdist workers, each taking the next test when it is free (TEST_WORKERS=0 runs the
# suite in one process; tests/conftest.py says why the tests can run side by side).
TEST_WORKERS ?= 2
test: venv airflow-home imports types kafka-tools system-tools
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

imports: venv
	@out=$$($(VENV)/bin/lint-imports --no-cache 2>&1) || { echo "$$out"; exit 1; }; echo "$$out" | tail -n 1

types: venv
	@out=$$($(VENV)/bin/mypy 2>&1) || { echo "$$out"; exit 1; }; echo "$$out" | tail -n 1

demo: venv airflow-home
	$(PY) -m migration.demo $(DEMO_ARGS)

# The Airflow UI on .airflow and airflow.cfg (exported above) with the demo's runs (out/demo):
# api-server on 127.0.0.1 (port 8080, else a free one; UI_ARGS="--port N", "--home DIR"),
# scheduler, dag-processor and triggerer; spark_default in its database. Prints the URL; Ctrl-C stops all four.
ui: venv airflow-home
	$(PY) -m migration.demo.ui $(UI_ARGS)

bench: venv
	$(PY) -m bench.run $(BENCH_ARGS)

lint: venv
	$(VENV)/bin/ruff check .

schemas: venv
	$(PY) -m migration.migrations.schema_export

# The fuzz targets of tests/fuzz with the long profile: the targets share KMIGRATE_FUZZ_SECONDS
# (default 300); timeout bounds shrinking and hangs in native code. Non-zero exit on any finding.
KMIGRATE_FUZZ_SECONDS ?= 300
fuzz: venv
	KMIGRATE_FUZZ=long KMIGRATE_FUZZ_SECONDS=$(KMIGRATE_FUZZ_SECONDS) timeout --kill-after=30 $$(( $(KMIGRATE_FUZZ_SECONDS) + 600 )) $(PY) -m pytest -q tests/fuzz $(PYTEST_ARGS)

clean:
	rm -rf out .airflow .pytest_cache
