# The two commands of the README. Both set everything up first: a virtual environment in
# .venv with the exact, hashed versions of requirements.lock, then the project itself.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# uv installs the lock (a fresh .venv in about a quarter of pip's time: docs/reproducibility.md)
# and writes it; pinned, like everything else the set-up installs.
UV_VERSION := 0.13.9
UV := $(BIN)/uv
export DVC_NO_ANALYTICS := 1

.PHONY: setup system-deps repro lint test coverage lock clean-venv

$(UV):
	$(PYTHON) -c 'import sys; sys.exit("Python 3.10 or newer is required") if sys.version_info < (3, 10) else None'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)

# --compile-bytecode: every module compiled once here, not in each process that imports it
# (where Python may not write its caches, importing TensorFlow, MLflow and DVC from source took
# 2.4x as long: docs/reproducibility.md).
$(BIN)/pipeline: pyproject.toml requirements.lock | $(UV)
	$(UV) pip install --quiet --python $(BIN)/python --require-hashes --compile-bytecode -r requirements.lock
	$(UV) pip install --quiet --python $(BIN)/python --no-deps -e .
	$(BIN)/python -m pip check --disable-pip-version-check
	@touch $@

setup: $(BIN)/pipeline

# requirements.lock from pyproject.toml's ranges: every dependency and every extra (postgres,
# gpu, test), for every Python the project supports and every platform, with sha256 hashes and
# no index URL;
# then the images' locks (docker/ngc.lock, docker/cuda.lock, docker/mlflow.lock: see
# scripts/container-locks.sh).
lock: | $(UV)
	$(UV) pip compile pyproject.toml --all-extras --universal --generate-hashes \
	    --python-version 3.10 --quiet --output-file requirements.lock
	bash scripts/container-locks.sh $(UV)

# Download, preprocess, train and evaluate both datasets (what changed only).
repro: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc repro
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc metrics show

system-deps:
	bash scripts/system-deps.sh

# The linter, the formatter's check and the type checker (pyproject.toml's [tool.ruff] and
# [tool.mypy]): seconds, so that a mistake shows before the suite's minutes.
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The whole test suite, after lint: unit, multi-replica, multi-worker, faults, end-to-end (dvc repro +
# mlflow server), the shell blocks of the README and docs/, the docs site, the containers and
# the MLflow UI in headless Chromium (Debian's packages installed when missing).
test: setup lint system-deps
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/pytest

# The same suite under coverage.py, then the line coverage of pipeline/ and stages/, measured in
# every process the tests started (pyproject.toml, [tool.coverage]). Its tracer makes the
# suite's TensorFlow processes about 1.4x as long (docs/testing.md), so `make test` runs without.
coverage: setup system-deps
	rm -f .coverage .coverage.*
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/coverage run -m pytest; status=$$?; \
	$(BIN)/coverage combine --quiet && $(BIN)/coverage report; exit $$status

clean-venv:
	rm -rf $(VENV)
