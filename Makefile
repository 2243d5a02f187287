# Two entry points: `make demo` runs the main job end to end, `make test` runs the tests.
# Both create .venv and install the package on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))

.PHONY: demo test test-long lint venv clean bench

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $@

# An editable install writes no bytecode where PYTHONDONTWRITEBYTECODE is set: compile it
# here (quietly; only what changed), or every fresh `carbonstore` compiles its modules.
venv: $(VENV)/.installed
	@$(PY) -m compileall -q carbonstore >/dev/null

demo: venv
	$(PY) -m carbonstore.demo

test: venv
	$(PY) tools/check_imports.py
	$(PY) -m pytest -q -p no:cacheprovider --durations=40 -n 2 --dist loadfile -m "not long" tests

# The long runs of the race, damage and fuzz suites (about half an hour on 2 cores).
test-long: venv
	$(PY) -m pytest -q -p no:cacheprovider -m long tests

lint: venv
	$(PY) -m ruff check carbonstore tests bench tools
	$(PY) tools/check_imports.py
	$(PY) -m mypy carbonstore

clean:
	rm -rf carbon.store sample_data .pytest_cache
