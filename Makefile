# Everything a fresh machine needs: a virtualenv, the package, and (inside the commands) the
# services — local PostgreSQL/Redis when they answer, embedded ones when they do not.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed

.PHONY: demo test lint bench clean browser

$(INSTALLED): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(INSTALLED)

demo: $(INSTALLED)
	$(PY) -m switchboard demo

# The console's test drives Debian's headless Chromium; it is installed when missing (as root).
BROWSER := $(shell command -v chromium || command -v chromium-browser)

browser:
ifeq ($(BROWSER),)
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null || \
		(apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null)
endif

test: $(INSTALLED) browser
	$(PY) -m pytest

lint: $(INSTALLED)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy pipeline models workers gateway simulator switchboard bench

bench: $(INSTALLED)
	$(PY) -m pip install --quiet -e '.[bench]'
	$(PY) -m switchboard bench --save .switchboard/bench.json
	$(PY) -m bench.plot .switchboard/bench.json docs/capacity.png

clean:
	rm -rf $(VENV) .switchboard
