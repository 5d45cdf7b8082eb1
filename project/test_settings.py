"""Settings for pytest: the production module (project.settings), with only what tests must change.

What changes, and why:
* DATABASES — the test server CRS_TEST_DATABASE_URL (PostgreSQL, pooled as in production but
  waiting up to 60 s for a connection, see below), or
  SQLite without it: pytest-django creates and drops its own `test_...` database there, and a
  test must never touch the operator's DATABASE_URL.
* REDIS_URL, CHANNEL_LAYERS, CELERY_BROKER_URL, CACHES — in-process (in-memory layer, `memory://`
  broker): tests run tasks and pushes in the test process; a test that needs Redis reads
  CRS_TEST_REDIS_URL and starts its own servers (which then run the production settings).
* PASSWORD_HASHERS — MD5: a login costs ~0.4 s with the production hasher, and tests log in often.
* AXES_ENABLED — off: Django's test client logs in without a request, which django-axes
  refuses; the throttling tests switch it on (tests/test_web_login_throttle.py).
"""

import os

from .settings import *  # noqa: F403
from .settings import VAR_DIR, database_config, env_bool, sqlite_config

CRS_TEST_DATABASE_URL = os.environ.get("CRS_TEST_DATABASE_URL", "")
CRS_TEST_REDIS_URL = os.environ.get("CRS_TEST_REDIS_URL", "")
CRS_TEST_REQUIRE_SERVICES = env_bool("CRS_TEST_REQUIRE_SERVICES", False)

DATABASES = {
    "default": database_config(CRS_TEST_DATABASE_URL)
    if CRS_TEST_DATABASE_URL
    else sqlite_config(VAR_DIR / "test.sqlite3")
}
if CRS_TEST_DATABASE_URL:
    # Django's test client bypasses the ASGI door (project/admission.py) that keeps a served
    # burst out of the pool's queue, so the threads of a concurrency test (50 approvals at once)
    # wait in the pool itself: long enough for a busy CI machine, as the door would let them.
    DATABASES["default"]["OPTIONS"]["pool"]["timeout"] = 60
REDIS_URL = ""
CHANNEL_LAYERS = {"default": {"BACKEND": "dashboard.live.layers.ThreadSafeInMemoryChannelLayer"}}
CELERY_BROKER_URL = "memory://"
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
AXES_ENABLED = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast logins in tests
# Pages render without a collectstatic run first; tests/test_web_static.py runs it itself.
STORAGES = {**STORAGES, "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}  # noqa: F405
