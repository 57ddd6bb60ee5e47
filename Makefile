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
# of this version, fetched once with npm (only its tarball, no dependencies).
MERMAID_VERSION := 11.12.0
MERMAID_JS      := docs/javascripts/mermaid.min.js

$(MERMAID_JS): Makefile
	mkdir -p $(@D) .cache/npm
	cd .cache/npm && npm pack --silent mermaid@$(MERMAID_VERSION) >/dev/null
	tar -xzf .cache/npm/mermaid-$(MERMAID_VERSION).tgz -O package/dist/mermaid.min.js > $@.tmp
	mv $@.tmp $@

# the docs need only the docs tools (no torch, no test tools)
.stamp-docs: .stamp-install requirements-docs.txt $(MERMAID_JS)
	$(PIP) install -q -r requirements-docs.txt
	touch $@

# the test tools are the `dev` extra; requirements-test.txt adds the CPU torch pin and the
# example plugin
# the wire oracles also need a C++ compiler, flatc and libflatbuffers-dev (apt, when missing)
.stamp-test: .stamp-docs pyproject.toml requirements-test.txt tools/install_wire_oracle_deps.sh
	$(PIP) install -q -e '.[dev]' -r requirements-test.txt
	bash tools/install_wire_oracle_deps.sh
	touch $@

demo: .stamp-install
	$(PY) examples/sdpa_backward_numpy.py

lint: .stamp-test
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

typecheck: .stamp-test
	$(PY) -m mypy

docs: .stamp-docs
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

pytest: .stamp-test
	$(PY) -m pytest -q

test: lint typecheck docs pytest

clean:
	rm -rf $(VENV) .stamp-* .mypy_cache .ruff_cache .pytest_cache site .cache $(MERMAID_JS)
