# Everything runs from a virtualenv this Makefile builds itself, so a fresh machine needs only python3.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python

.PHONY: run test test-fast bench lint clean compile peer-venv mutation floors

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
# otherwise recompile it from source. Likewise cache the packaged gates.toml's parse (nxgates/tomlcache.py).
compile: $(VENV)/.run-installed
	@$(PY) -m compileall -q nxgates
	@$(PY) -c "from nxgates import registry; registry.cache_packaged()"

run: compile
	$(VENV)/bin/nxgates run all

# The suite on every core (pytest-xdist, one worker per core): --dist loadgroup keeps the tests that need the
# machine (Dask clusters, signals, wall-clock bounds) on one worker, one after another (tests/_xdist.py).
# XDIST= runs it in one process, as `pytest` alone does.
XDIST ?= -n auto --dist loadgroup

# The suite starts some three hundred Python processes (the console script, pool workers, pytest sessions). With
# PYTHONDONTWRITEBYTECODE set, as on CI, each would compile its modules from source, and pytest rewrite the asserts
# of every plugin's package (hypothesis, nxgates) again: the suite writes its bytecode caches (__pycache__,
# ignored by git) so that each module is compiled once per checkout, not once per process.
test: $(VENV)/.dev-installed
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q $(XDIST)

# The edit loop: the last run's failures first, stop at the first failure, and leave out the tests that need the
# machine (marked whole_machine by tests/_xdist.py: Dask clusters, signals, wall-clock bounds; most of the suite's
# waiting). `make test` runs them all.
test-fast: $(VENV)/.dev-installed
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q $(XDIST) --ff -x -m "not whole_machine"

lint: $(VENV)/.dev-installed
	$(VENV)/bin/ruff check .

bench: compile
	$(PY) benchmarks/bench.py

# Mutation testing (slow, about two hours on two cores; not part of `make test`): mutmut over the files
# [tool.mutmut] names in pyproject.toml, two workers, then the score per file (exit 1 below 85%; docs/mutation.md).
# The run continues an earlier one in mutants/ (its survivors tried again with today's tests); rm -rf mutants to
# start over. tools/mutation/run.py is mutmut started so that Dask's spawned workers can start under it.
# Survivors: mutmut show NAME.
mutation: $(VENV)/.dev-installed
	mkdir -p mutants
	$(PY) tools/mutation/retry.py
	@start=$$(date +%s); \
	$(PY) tools/mutation/run.py run --max-children 2 > mutants/run.log 2>&1 || { tail -n 30 mutants/run.log; exit 1; }; \
	echo "mutmut run: $$(( $$(date +%s) - start )) s (log: mutants/run.log)"
	$(PY) tools/mutation/score.py

# torch and JAX (CPU) for the benchmark's batched peers only (never dependencies): torch's CPU wheel this
# machine has on disk, and jax with its CPU jaxlib.
peer-venv:
	$(PYTHON) -m venv .venv-peer
	.venv-peer/bin/python -m pip install -q torch==2.13.0 numpy
	.venv-peer/bin/python -m pip install -q jax jaxlib

# The dependency floors of pyproject.toml, proven (a few minutes, downloads from PyPI; not part of `make test`):
# a fresh venv with every dependency of the package and of its dask and html extras at the lowest version
# pyproject.toml allows (">=X" installed as "==X"; a requirement without a floor is an error), then
# `nxgates selftest` from an empty directory (every gate clean and with each fault, parallel-grad's on Dask too),
# and dp-train and lora on Dask with an HTML report (matplotlib's plots).
FLOORS ?= .venv-floors
FLOOR_PINS := import tomllib; p = tomllib.load(open("pyproject.toml", "rb"))["project"]; \
	reqs = p["dependencies"] + p["optional-dependencies"]["dask"] + p["optional-dependencies"]["html"]; \
	bad = [r for r in reqs if r.count(">=") != 1 or "," in r]; \
	bad and exit(f"no single floor: {bad}"); \
	print("\n".join(r.replace(">=", "==") for r in reqs))

floors:
	rm -rf $(FLOORS)
	$(PYTHON) -m venv $(FLOORS)
	$(PYTHON) -c '$(FLOOR_PINS)' > $(FLOORS)/floors.txt
	$(FLOORS)/bin/python -m pip install -q -e '.[dask,html]' -r $(FLOORS)/floors.txt
	@echo "floors: $$(tr '\n' ' ' < $(FLOORS)/floors.txt)(python $$($(FLOORS)/bin/python -c 'import platform; print(platform.python_version())'))"
	cd "$$(mktemp -d)" && $(CURDIR)/$(FLOORS)/bin/nxgates selftest && \
		$(CURDIR)/$(FLOORS)/bin/nxgates run dp-train lora --executor dask --html report.html -q

clean:
	rm -rf $(VENV) .venv-peer $(FLOORS) mutants build dist *.egg-info .pytest_cache .ruff_cache bench-results

# docs/performance.md, whole, from the last `make bench` (bench-results/bench.json), kept as docs/bench.json;
# `tools/perf_table.py --check` tells whether the committed document is what docs/bench.json gives.
.PHONY: docs
docs:
	$(PYTHON) tools/perf_table.py
