# Everything runs from a virtualenv this Makefile builds itself, so a fresh machine needs only python3.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python

.PHONY: run test bench lint clean compile

$(PY):
	$(PYTHON) -m venv $(VENV)

# Re-install whenever pyproject.toml changes; the stamp files record what is installed.
$(VENV)/.run-installed: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.dev-installed: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[dev]'
	touch $(VENV)/.run-installed $@

# Byte-compile the (editable) package: with PYTHONDONTWRITEBYTECODE set, as on CI, every start would
# otherwise recompile it from source.
compile: $(VENV)/.run-installed
	@$(PY) -m compileall -q nxgates

run: compile
	$(VENV)/bin/nxgates run all

test: $(VENV)/.dev-installed
	$(PY) -m pytest -q

lint: $(VENV)/.dev-installed
	$(VENV)/bin/ruff check .

bench: compile
	$(PY) benchmarks/bench.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache bench-results
