# Two commands on a fresh machine with Python 3.11+:  make demo  /  make test
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint separation venv proto bench clean

$(STAMP): pyproject.toml
	@echo "make: creating .venv and installing ldp with its test and dev tools (1–2 minutes the first time)"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,dev]'
	touch $(STAMP)
	@echo "make: .venv is ready (activate it with: source .venv/bin/activate)"

venv: $(STAMP)

demo: $(STAMP)
	$(PY) -m simulations.demo

test: $(STAMP)
	$(PY) -m pytest -q

# ruff (lint + import order) on everything, mypy on ldp/ (configured in pyproject.toml)
lint: $(STAMP)
	$(VENV)/bin/ruff check ldp simulations tests benchmarks
	$(VENV)/bin/mypy

separation: $(STAMP)
	$(VENV)/bin/ldp-sim run separation

proto: $(STAMP)
	$(PY) -m ldp.wire.codegen

bench: $(STAMP)
	$(PY) benchmarks/randomizers.py
	$(PY) benchmarks/transport.py

clean:
	rm -rf $(VENV) build *.egg-info
