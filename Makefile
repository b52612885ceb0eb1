# Everything a fresh machine needs: a virtualenv, the package, and (inside the commands) the
# services — local PostgreSQL/Redis when they answer, embedded ones when they do not.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed
# The exact versions of everything installed (the extras dev and bench, resolved together) that
# the suite last passed with. Every install below takes them, so a fresh machine runs what was
# tested, not whatever was released since; `make upgrade-check` moves them forward.
LOCK := constraints.txt
UPGRADE := .switchboard/upgrade

.PHONY: venv demo test lint bench clean browser promtool lock upgrade-check

$(INSTALLED): pyproject.toml $(LOCK)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -c $(LOCK) --upgrade pip
	$(PY) -m pip install --quiet -c $(LOCK) -e '.[dev]'
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
	$(PY) -m pip install --quiet -c $(LOCK) -e '.[bench]'
	$(PY) -m switchboard bench --save .switchboard/bench.json
	$(PY) -m bench.plot .switchboard/bench.json docs/capacity.png

# The lock written from a virtualenv: everything pip installed but the project itself and the
# virtualenv's own setuptools (the build takes its own, bounded in pyproject.toml).
define write_lock
	{ echo "# Written by make ($@) from what the suite passed with; edit pyproject.toml, not this."; \
	  $(1) -m pip freeze --all --exclude-editable | grep -v -E '^(setuptools|wheel)=='; } > $(2)
endef

# The lock again from the current virtualenv (after installing something by hand, say).
lock: $(INSTALLED)
	$(PY) -m pip install --quiet -c $(LOCK) -e '.[dev,bench]'
	$(call write_lock,$(PY),$(LOCK))

# The newest versions pyproject.toml allows, in a virtualenv of their own, through the whole
# suite: a new release (a major is bounded out until a session takes it) is met here, not by a
# user. When the suite passes, the lock is rewritten with them (review and commit it); when it
# fails, the lock stays and the failure names what to fix.
upgrade-check: browser promtool
	rm -rf $(UPGRADE)
	$(PYTHON) -m venv $(UPGRADE)/venv
	$(UPGRADE)/venv/bin/python -m pip install --quiet --upgrade pip
	$(UPGRADE)/venv/bin/python -m pip install --quiet --upgrade -e '.[dev,bench]'
	$(call write_lock,$(UPGRADE)/venv/bin/python,$(UPGRADE)/constraints.txt)
	diff -u $(LOCK) $(UPGRADE)/constraints.txt || true
	$(UPGRADE)/venv/bin/python -m pytest
	cp $(UPGRADE)/constraints.txt $(LOCK)
	@echo "upgrade-check: the suite passed with the newest allowed versions; $(LOCK) now holds them"

clean:
	rm -rf $(VENV) .switchboard
