# `make run` and `make test` bootstrap themselves: they create .venv with Python 3.12
# (Django 6 needs it; see scripts/python312) and install the project, once, at the exact
# versions of requirements-test.lock (`make lock` recompiles the locks from pyproject.toml).
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PORT ?= 8000

.PHONY: run test soak check test-unit test-e2e web worker beat bench venv lock clean

$(STAMP): pyproject.toml requirements-test.lock
	@test -x $(PY) || $$(scripts/python312) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-test.lock
	$(PY) -m pip install -q --no-deps -e .
	@touch $(STAMP)

# The locks: exact versions for the image (runtime) and for development and CI (with the tests' tools).
lock: $(STAMP)
	$(PY) -m pip install -q pip-tools
	$(VENV)/bin/pip-compile -q --strip-extras --no-header --no-emit-index-url --no-emit-find-links -o requirements.lock pyproject.toml
	$(VENV)/bin/pip-compile -q --strip-extras --no-header --no-emit-index-url --no-emit-find-links --extra test -o requirements-test.lock pyproject.toml

venv: $(STAMP)

run: $(STAMP)
	$(PY) manage.py runembedded --port $(PORT)

# Unit, integration and web tests first, then the browser tests as their own run
# (Playwright's sync API and pytest-django's DB setup do not mix in one process).
# The soak probes (mostly idle: a socket held 10 minutes on a stack and Redis of their own)
# run meanwhile in the background; their output is shown at the end and their failure fails
# the target. A failed suite skips the browser run but still waits for the soak's verdict.
test: $(STAMP)
	@mkdir -p tests/artifacts
	@$(PY) -m pytest -m soak -q -p no:cacheprovider >tests/artifacts/soak.log 2>&1 & soak=$$!; \
	echo "soak probes running in the background (pid $$soak, tests/artifacts/soak.log)"; \
	$(PY) -m pytest -m "not e2e and not soak" -q && $(PY) -m pytest -m e2e -q; suite=$$?; \
	wait $$soak; soaked=$$?; \
	echo "--- soak probes (exit $$soaked) ---"; cat tests/artifacts/soak.log; \
	test $$suite -eq 0 && test $$soaked -eq 0

# The long probes of the distributed stack alone (`make test` runs them too, in parallel).
soak: $(STAMP)
	$(PY) -m pytest -m soak -q

# Lint and format (ruff), types (mypy: crs strictly, dashboard with django-stubs); .ci/run runs it before the tests.
check: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

test-unit: $(STAMP)
	$(PY) -m pytest -m "not e2e" -q

test-e2e: $(STAMP)
	$(PY) -m pytest -m e2e -q

# Distributed mode: needs DATABASE_URL and REDIS_URL.
web: $(STAMP)
	$(PY) manage.py migrate --noinput
	$(PY) manage.py collectstatic --noinput -v 0
	$(VENV)/bin/daphne -b 0.0.0.0 -p $(PORT) dashboard.asgi:application

# Supervised, like the containers' restart policy: a Redis outage can stop a Celery worker,
# and a PostgreSQL outage stops beat (its scheduler cannot read the schedule).
worker: $(STAMP)
	scripts/supervise $(VENV)/bin/celery -A dashboard worker -l info

beat: $(STAMP)
	scripts/supervise $(VENV)/bin/celery -A dashboard beat -l info --scheduler django_celery_beat.schedulers:DatabaseScheduler

bench: $(STAMP)
	$(PY) bench/engine_speed.py

clean:
	rm -rf $(VENV)
