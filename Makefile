# The two commands of the README. Both set everything up first (a virtual environment in
# .venv with the project and its pinned ranges), so they work on a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export DVC_NO_ANALYTICS := 1

.PHONY: setup system-deps repro test clean-venv

$(BIN)/pipeline: pyproject.toml
	$(PYTHON) -c 'import sys; sys.exit("Python 3.10 or newer is required") if sys.version_info < (3, 10) else None'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	@touch $@

setup: $(BIN)/pipeline

# Download, preprocess, train and evaluate both datasets (what changed only).
repro: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc repro
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc metrics show

system-deps:
	bash scripts/system-deps.sh

# The whole test suite: unit, multi-replica, end-to-end (dvc repro + mlflow server) and
# the MLflow UI in headless Chromium (installed from Debian's packages when missing).
test: setup system-deps
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest

clean-venv:
	rm -rf $(VENV)
