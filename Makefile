# Two commands on a fresh machine with Python 3.11+:  make demo  /  make test
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test separation venv proto bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,dev]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(PY) -m simulations.demo

test: $(STAMP)
	$(PY) -m pytest -q

separation: $(STAMP)
	$(VENV)/bin/ldp-sim run separation

proto: $(STAMP)
	$(PY) -m ldp.wire.codegen

bench: $(STAMP)
	$(PY) benchmarks/randomizers.py
	$(PY) benchmarks/transport.py

clean:
	rm -rf $(VENV) build *.egg-info
