"""Settings for pytest: the real ones, with the services CI provides (or SQLite and in-memory).

CRS_TEST_DATABASE_URL selects the test database server (pytest-django creates and drops
its own `test_...` database there); tests that need Redis read CRS_TEST_REDIS_URL
themselves. Celery and Channels stay in-process unless a test says otherwise.
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
# Worker threads must not keep connections open, or PostgreSQL refuses to drop the test database.
DATABASES["default"]["CONN_MAX_AGE"] = 0
REDIS_URL = ""
CHANNEL_LAYERS = {"default": {"BACKEND": "dashboard.layers.ThreadSafeInMemoryChannelLayer"}}
CELERY_BROKER_URL = "memory://"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast logins in tests
# Pages render without a collectstatic run first; tests/test_web_static.py runs it itself.
STORAGES = {**STORAGES, "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}  # noqa: F405
