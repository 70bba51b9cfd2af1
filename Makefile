# Two commands on a fresh machine with Python 3.11+:  make demo  /  make test
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint docs separation venv proto bench bench-peers clean

$(STAMP): pyproject.toml
	@echo "make: creating .venv and installing ldp with its test, dev and docs tools (1–2 minutes the first time)"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	@# the distribution was called ldp before 0.3 (a name PyPI gives to another project): drop it from an older .venv
	$(PY) -m pip uninstall --quiet --yes ldp 2>/dev/null || true
	$(PY) -m pip install --quiet -e '.[test,dev,docs]'
	touch $(STAMP)
	@echo "make: .venv is ready (activate it with: source .venv/bin/activate)"

venv: $(STAMP)

demo: $(STAMP)
	$(PY) -m ldp.simulations.demo

# One pytest-xdist worker per core. Each test goes to whichever worker is free, except that a
# test file with a module-scoped fixture (a Ray cluster, a class of 30 students) stays on one
# worker, so the fixture is built once (the loadgroup scheduler in tests/conftest.py).
test: $(STAMP)
	$(PY) -m pytest -q -n auto --dist loadgroup

# ruff (lint + import order) on everything, mypy on ldp/, the layer contract (all configured in pyproject.toml)
lint: $(STAMP)
	$(VENV)/bin/ruff check ldp simulations tests benchmarks
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	@# the same contract where the wheel puts simulations/ (ldp/simulations/): grimp reads only ldp/ in the checkout
	$(PY) -m pytest -q -p no:cacheprovider tests/docs/test_layers.py

# The documentation site (mkdocs.yml): docs/*.md and the API reference generated from the
# docstrings, into site/. --strict: a broken link or a docstring that does not parse fails (CI runs it).
docs: $(STAMP)
	@# (NO_MKDOCS_2_WARNING: mkdocs-material's banner about its successor, printed on every build)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

separation: $(STAMP)
	$(VENV)/bin/ldp-sim run separation

proto: $(STAMP)
	$(PY) -m ldp.wire.codegen

bench: $(STAMP)
	$(PY) benchmarks/randomizers.py
	$(PY) benchmarks/samplers.py
	$(PY) benchmarks/transport.py
	$(PY) benchmarks/scaling_projection.py
	$(PY) benchmarks/reply_parts.py

# Frequency oracles against pure-LDP 1.2.0 and multi-freq-ldpy 0.2.5, in their own venv: both break
# with numpy >= 2 and xxhash >= 4 (and pure-LDP imports scikit-learn, pandas and statsmodels).
PEERS := .venv-peers
$(PEERS)/.installed:
	test -x $(PEERS)/bin/python || $(PYTHON) -m venv $(PEERS)
	$(PEERS)/bin/python -m pip install --quiet numpy==1.26.4 xxhash==3.8.2 scipy==1.13.1 scikit-learn==1.5.2 \
		pandas==2.2.3 statsmodels==0.14.6 pure-ldp==1.2.0 multi-freq-ldpy==0.2.5
	touch $@

bench-peers: $(STAMP) $(PEERS)/.installed
	$(PY) benchmarks/peers.py
	$(PY) benchmarks/peers_longitudinal.py

clean:
	rm -rf $(VENV) build site *.egg-info
