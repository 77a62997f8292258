# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
EXTRAS ?= dev

.PHONY: demo test lint typecheck pytest bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# Reinstall whenever the project's dependencies change.
$(VENV)/.installed-$(EXTRAS): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[$(EXTRAS)]"
	touch $@

demo: $(VENV)/.installed-$(EXTRAS)
	$(BIN)/python examples/demo.py

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check src tests bench examples docs
	$(BIN)/ruff format --check src tests bench examples docs

typecheck: $(VENV)/.installed-dev
	$(BIN)/pyright

pytest: $(VENV)/.installed-dev
	$(BIN)/python -m pytest

test: lint typecheck pytest

bench: $(VENV)/.installed-dev
	$(BIN)/python bench/import_time.py
	$(BIN)/python bench/loop_overhead.py
	$(BIN)/python bench/provider_overhead.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
