# Everything a fresh machine needs: a virtualenv, the package, and (inside the commands) the
# services — local PostgreSQL/Redis when they answer, embedded ones when they do not.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed

.PHONY: venv demo test lint bench clean browser promtool

$(INSTALLED): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(INSTALLED)

# The virtualenv alone, for running the processes by hand (README, "Running it"; the Procfile).
venv: $(INSTALLED)

demo: $(INSTALLED)
	$(PY) -m switchboard demo

# The console's test drives Debian's headless Chromium; it is installed when missing (as root).
BROWSER := $(shell command -v chromium || command -v chromium-browser)

browser:
ifeq ($(BROWSER),)
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null || \
		(apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null)
endif

# The metrics test runs `promtool check metrics` (Debian's prometheus package); installed when
# missing (as root), without the node exporter it recommends. The package would start a
# Prometheus server on :9090 where systemd runs: only promtool is wanted, so it is stopped.
PROMTOOL := $(shell command -v promtool)

promtool:
ifeq ($(PROMTOOL),)
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus >/dev/null || \
		(apt-get update -q >/dev/null && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus >/dev/null)
	systemctl disable --now prometheus >/dev/null 2>&1 || true
endif

test: $(INSTALLED) browser promtool
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
