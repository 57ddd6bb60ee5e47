# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip

.PHONY: demo test lint typecheck docs pytest clean

$(PY):
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip

.stamp-install: $(PY) pyproject.toml
	$(PIP) install -q -e .
	touch $@

# Mermaid is served with the site (no CDN at view time): the script comes from the npm package
# of this version, fetched once with npm (only its tarball, no dependencies). Without npm the
# site is built all the same and shows each diagram as its Mermaid source under a note
# (docs/hooks/hipdnn_docs.py); the rule then runs again on every build until npm is installed.
MERMAID_VERSION := 11.12.0
MERMAID_JS      := docs/javascripts/mermaid.min.js
NPM             ?= npm

$(MERMAID_JS): Makefile
	@if command -v $(NPM) >/dev/null 2>&1; then \
	    set -e; mkdir -p $(@D) .cache/npm; \
	    (cd .cache/npm && $(NPM) pack --silent mermaid@$(MERMAID_VERSION) >/dev/null); \
	    tar -xzf .cache/npm/mermaid-$(MERMAID_VERSION).tgz -O package/dist/mermaid.min.js > $@.tmp; \
	    mv $@.tmp $@; \
	else \
	    echo "note: $(NPM) is not installed: the docs show the Mermaid diagrams as source" \
	        "(install npm, then make docs, to draw them)"; \
	fi

# the docs need only the docs tools (no torch, no test tools)
.stamp-docs: .stamp-install requirements-docs.txt
	$(PIP) install -q -r requirements-docs.txt
	touch $@

# the test tools are the `dev` extra; requirements-test.txt adds the CPU torch pin
# the wire oracles also need a C++ compiler, flatc and libflatbuffers-dev (apt, when missing)
# (earlier versions installed the example plugin here; it is removed from such an environment)
.stamp-test: .stamp-docs pyproject.toml requirements-test.txt tools/install_wire_oracle_deps.sh
	$(PIP) install -q -e '.[dev]' -r requirements-test.txt
	$(PIP) uninstall -q -y hipdnn-custom-backend 2>/dev/null || true
	bash tools/install_wire_oracle_deps.sh
	touch $@

demo: .stamp-install
	$(PY) examples/sdpa_backward_numpy.py

lint: .stamp-test
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

typecheck: .stamp-test
	$(PY) -m mypy

docs: .stamp-docs $(MERMAID_JS)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

# skips summed up by reason at the end (tests/compact_skips.py); the tests run on every core
# (pytest-xdist; a test file's tests stay on one worker), PYTEST_ARGS adds options of your own
# (`make pytest PYTEST_ARGS="-n0 -x tests/test_cli.py"`)
PYTEST_WORKERS ?= auto
pytest: .stamp-test $(MERMAID_JS)
	$(PY) -m pytest -p compact_skips -rfE -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

test: lint typecheck docs pytest

clean:
	rm -rf $(VENV) .stamp-* .mypy_cache .ruff_cache .pytest_cache site .cache $(MERMAID_JS)
