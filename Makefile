# The two commands of the README: `make demo` and `make test`. Each does all set-up on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# `make demo` and `make dist` each have a lean venv of their own (the demo and release extras in pyproject.toml),
# so neither needs the development venv and its test toolchain.
DEMO_VENV := .venv-demo
DEMO_PY := $(DEMO_VENV)/bin/python
DEMO_STAMP := $(DEMO_VENV)/.installed
DIST_VENV := .venv-dist
DIST_PY := $(DIST_VENV)/bin/python
DIST_STAMP := $(DIST_VENV)/.installed
# Every broker and Spark JVM a run starts inherits this, so the leftover check finds exactly them.
export PULSAR_THROTTLED_RUN_ID := $(shell date +%s%N)

.PHONY: demo test lint unit bench clean install native wheels dist docs

UV_INSTALL = $(PY) -m uv pip install -q --python $(PY) --compile-bytecode -e '.[spark,test,bench,plots,docs]' \
	--config-settings-package pulsar-throttled-source:editable_mode=compat

$(STAMP): pyproject.toml native/pyproject.toml native/setup.py $(wildcard native/src/*.c native/src/*.h)
	$(PYTHON) -m venv $(VENV)
	# uv installs the ~140 packages in ~13 s where pip took ~40 (every make test on a clean clone pays it).
	# Offline first, from uv's cache (the newest versions it has seen): answered "modified" on revalidation by this
	# machine's package registry, uv would rebuild PySpark's sdist (~17 s) every time; online when the cache lacks
	# anything the project asks for (a fresh machine, a new dependency).
	# --compile-bytecode, as pip does: where PYTHONDONTWRITEBYTECODE is set (this machine), a module not compiled at
	# install is compiled again in every process (each Spark Python worker: ~0.5 s of CPU more).
	# compat mode puts the repo on sys.path, so PySpark finds pyspark_pulsar_throttled (auto-registration)
	$(PY) -m pip install -q 'uv>=0.8'
	$(UV_INSTALL) --offline 2>/dev/null || $(UV_INSTALL)
	# The native read path (readPath=auto uses it), built here with the C compiler (gcc); optional for users.
	# Without a working C compiler: one NOTICE, and everything runs on the Python path (tools/native_build.py).
	$(PY) -m tools.native_build
	rm -rf native/build native/*.egg-info
	touch $(STAMP)

install: $(STAMP)

# The native read path alone, e.g. after installing gcc on a machine where `make install` skipped it.
native: $(STAMP)
	$(PY) -m tools.native_build
	rm -rf native/build native/*.egg-info

# The demo's venv: the package (editable, so the checkout's local broker launcher is importable) with the demo
# extra only, and the native read path where a C compiler works (as make install does).
$(DEMO_STAMP): pyproject.toml native/pyproject.toml native/setup.py $(wildcard native/src/*.c native/src/*.h)
	$(PYTHON) -m venv $(DEMO_VENV)
	$(DEMO_PY) -m pip install -q --upgrade pip
	$(DEMO_PY) -m pip install -q -e '.[demo]' --config-settings editable_mode=compat
	$(DEMO_PY) -m tools.native_build
	rm -rf native/build native/*.egg-info
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(DEMO_PY) -m pulsar_throttled_source.local_broker fetch >/dev/null
	PYSPARK_PYTHON=$(abspath $(DEMO_PY)) $(DEMO_PY) examples/demo.py
	@$(DEMO_PY) tests/check_no_leftovers.py $(PULSAR_THROTTLED_RUN_ID)

# Lint (ruff), types (mypy) and the import contract (import-linter), all configured in pyproject.toml, and the
# GitHub Actions workflows (actionlint with shellcheck; built once per machine with Go, tools/actionlint.py):
# seconds, and part of every test run.
lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m mypy
	$(VENV)/bin/lint-imports
	$(PY) -m tools.actionlint

test: lint
	# The broker jars, and a class-data archive of them that makes each of the suite's broker starts faster (cached)
	$(PY) -m pulsar_throttled_source.local_broker fetch --class-archive >/dev/null
	$(PY) tests/identity_provider.py fetch >/dev/null  # the OAuth2 tests' authorization server (cached)
	$(PY) tests/compat_venvs.py >/dev/null  # PySpark 4.0.x and 4.1.x venvs for the compat tests (cached)
	$(PY) tests/release_venv.py >/dev/null  # a PySpark-only venv and a wheelhouse for the release install test (cached)
	# The suite's Spark homes and class-data archives of their jars for faster Spark starts (cached; a clean clone's venv finds them made)
	$(PY) tests/spark_class_archive.py >/dev/null
	# The checkout's package compiled (an editable install is not): the suite's ~750 Spark Python processes import it,
	# each compiling it again where PYTHONDONTWRITEBYTECODE is set (~0.08 s of CPU apiece); stale files are ignored
	$(PY) -m compileall -q -j 0 pulsar_throttled_source pyspark_pulsar_throttled.py
	# --durations 30: the slowest test phases (a module fixture's start shows in its first test's setup).
	# Two workers, each taking whole test files in collection order (tests/conftest.py puts the longest
	# first; module fixtures stay in one process). Three were barely faster on 2 cores (15:34 against about
	# 16-17 minutes) and loaded the machine enough for Python runners to miss Spark's connect-back time.
	# A test is rerun once, 10 s later, only when a Spark query's Python runner missed the fixed 10 s Spark
	# gives it to connect back (PythonWorkerFactory; not configurable), which a busy 2-core machine can
	# cause; any other failure fails the run (docs/DEVELOPMENT.md).
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) -m pytest -n 2 --dist loadfile --no-loadscope-reorder --reruns 1 --reruns-delay 10 --only-rerun 'to connect back' --durations 30 tests
	@$(PY) tests/check_no_leftovers.py $(PULSAR_THROTTLED_RUN_ID)

# The release artifacts, in dist/ (git-ignored): the sdist, the pure-Python wheel built from that sdist (as
# pip would from an index), the native read path's manylinux_2_17 x86_64 and aarch64 wheels (cross-compiled
# with Zig; native/build_wheels.py runs `auditwheel show` on each and fails unless it is manylinux_2_17), then
# `twine check --strict` on all four. On the 2-core test machine: 16-40 s,
# about 90 s with a cold Zig cache (~/.cache/zig: its glibc 2.17 stubs for each architecture). Its venv holds the
# release extra's tools only (build, twine, Zig, auditwheel, setuptools; tools/extra_requirements.py reads them).
$(DIST_STAMP): pyproject.toml tools/extra_requirements.py
	$(PYTHON) -m venv $(DIST_VENV)
	$(DIST_PY) -m pip install -q --upgrade pip
	$(DIST_PY) -m tools.extra_requirements release > $(DIST_VENV)/requirements.txt
	$(DIST_PY) -m pip install -q -r $(DIST_VENV)/requirements.txt
	touch $(DIST_STAMP)

dist: $(DIST_STAMP)
	rm -rf dist
	$(DIST_PY) -m build --outdir dist . >/dev/null
	$(DIST_PY) native/build_wheels.py --out dist
	$(DIST_PY) -m twine check --strict dist/*
	@ls -l dist

wheels: dist

# The documentation site (mkdocs.yml, docs/) into site/ (git-ignored): its generated tables checked against the
# option specs, then MkDocs with --strict, so a broken link or #anchor between pages fails. `make test` runs the
# same build (tests/unit/test_docs_site.py). NO_MKDOCS_2_WARNING: Material's banner about MkDocs 2.0, not ours.
docs: $(STAMP)
	$(PY) -m tools.readme_table --check
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

unit: $(STAMP)
	$(PY) -m pytest tests/unit -q

clean:
	rm -rf $(VENV) build *.egg-info
