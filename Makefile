# The two commands of the README: `make demo` and `make test`. Each does all set-up on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test unit bench clean install

$(STAMP): setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,bench]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) -m pulsar_throttled_source.local_broker fetch >/dev/null
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) examples/demo.py
	@$(PY) tests/check_no_leftovers.py

test: $(STAMP)
	$(PY) -m pulsar_throttled_source.local_broker fetch >/dev/null
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) -m pytest tests
	@$(PY) tests/check_no_leftovers.py

unit: $(STAMP)
	$(PY) -m pytest tests/unit -q

clean:
	rm -rf $(VENV) build *.egg-info
