# `make run` and `make test` bootstrap themselves: they create .venv with Python 3.12
# (Django 6 needs it; see scripts/python312) and install the project, once, at the exact
# versions of requirements-test.lock (`make lock` recompiles the locks from pyproject.toml).
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PORT ?= 8000

.PHONY: run test soak soak-faults check test-unit test-e2e web worker worker-proxmox beat bench bench-table settings-reference venv lock clean

# One install at a time: `make web`, `make worker` and `make beat` started together (three
# service units after an upgrade) each found the stamp stale and ran pip into the same .venv
# at once, and beat failed on a file another pip had just replaced. The first takes the lock
# (flock on this Makefile) and installs; the others wait for it, then find the stamp fresh.
ifdef CRS_VENV_LOCKED
$(STAMP): pyproject.toml requirements-test.lock
	@test -x $(PY) || $$(scripts/python312) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-test.lock
	$(PY) -m pip install -q --no-deps -e .
	@touch $(STAMP)
else
$(STAMP): pyproject.toml requirements-test.lock
	@flock Makefile $(MAKE) --no-print-directory CRS_VENV_LOCKED=1 $(STAMP)
endif

# The locks: exact versions for the image (runtime) and for development and CI (with the tests' tools).
lock: $(STAMP)
	$(PY) -m pip install -q pip-tools
	$(VENV)/bin/pip-compile -q --strip-extras --no-header --no-emit-index-url --no-emit-find-links -o requirements.lock pyproject.toml
	$(VENV)/bin/pip-compile -q --strip-extras --no-header --no-emit-index-url --no-emit-find-links --extra test -o requirements-test.lock pyproject.toml

venv: $(STAMP)

run: $(STAMP)
	$(PY) manage.py runembedded --port $(PORT)

# The long probes (soak), the browser tests, the tests with servers of their own and the rest
# as five pytest runs side by side (the browser tests in two), each on a database and Redis number of its own
# (scripts/testsuite.py says why); the browser tests are their own run anyway (Playwright's
# sync API and pytest-django's DB setup do not mix in one process). Any failed run fails it.
test: $(STAMP)
	@$(PY) scripts/testsuite.py

# The long probes of the distributed stack alone (`make test` runs them too, in parallel).
soak: $(STAMP)
	$(PY) -m pytest -m soak -q

# The fault soak (harness/faultsoak.py): the distributed stack under a fault a minute for MINUTES
# minutes, on its own database (on CRS_TEST_DATABASE_URL's server) and its own redis-server.
MINUTES ?= 10
soak-faults: $(STAMP)
	$(PY) -m harness.faultsoak --minutes $(MINUTES)

# Lint and format (ruff), types (mypy: crs strictly, dashboard with django-stubs), and the
# operator's guide (docs/) built strictly into site/ (git ignores it): a broken link fails.
# .ci/run runs it before the tests.
check: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/mkdocs build --strict --quiet

# docs/settings.md from the settings model (tests/test_docs.py fails when it is out of date).
settings-reference: $(STAMP)
	$(PY) scripts/settings_reference.py

test-unit: $(STAMP)
	$(PY) -m pytest -m "not e2e" -q

test-e2e: $(STAMP)
	$(PY) -m pytest -m e2e -q

# Distributed mode: needs DATABASE_URL and REDIS_URL. Web, worker and beat run supervised,
# like the containers' restart policy: a web or worker that dies comes back, a Redis outage
# can stop a Celery worker, and a PostgreSQL outage stops beat (it cannot read the schedule).
web: $(STAMP)
	$(PY) manage.py migrate --noinput
	$(PY) manage.py collectstatic --noinput -v 0
	scripts/supervise $(VENV)/bin/daphne -b 0.0.0.0 -p $(PORT) project.asgi:application

# The rounds (prefork: CPU) and the Proxmox collects (threads: each waits on the network
# without holding a process) have workers of their own; run both.
worker: $(STAMP)
	scripts/supervise $(VENV)/bin/celery -A project worker -n worker@%h -l info -Q celery,whatif

worker-proxmox: $(STAMP)
	scripts/supervise $(VENV)/bin/celery -A project worker -n proxmox@%h -l info -Q proxmox -P threads -c 50

beat: $(STAMP)
	scripts/supervise $(VENV)/bin/celery -A project beat -l info

bench: $(STAMP)
	$(PY) -m bench.engine_speed

# The table at the top of bench/README.md, from the latest results in bench/results/.
bench-table: $(STAMP)
	$(PY) -m bench.table

clean:
	rm -rf $(VENV)
