"""Production settings come from the environment, and Django's deployment check passes on them."""

import os
import secrets
import subprocess
import sys

from conftest import ROOT

# The environment README's production section asks for (distributed mode, served over HTTPS).
PRODUCTION = {
    "DJANGO_SETTINGS_MODULE": "dashboard.settings",
    "REDIS_URL": "redis://127.0.0.1:6379/9",
    "DATABASE_URL": "postgres://crs@db.example.com/crs",
    "CRS_SECRET_KEY": secrets.token_urlsafe(50),
    "CRS_ALLOWED_HOSTS": "crs.example.com",
    "CRS_HTTPS": "true",
    "CRS_HSTS_INCLUDE_SUBDOMAINS": "true",
    "CRS_HSTS_PRELOAD": "true",
}


def manage(*args, **env) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("CRS_", "DJANGO_", "REDIS_", "DATABASE_"))}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_with_the_production_environment():
    result = manage("check", "--deploy", "--fail-level", "WARNING", **PRODUCTION)
    assert result.returncode == 0, result.stderr
    assert "System check identified no issues" in result.stdout


def test_distributed_mode_refuses_to_start_without_a_secret_key():
    result = manage("check", **{**PRODUCTION, "CRS_SECRET_KEY": ""})
    assert result.returncode != 0
    assert "CRS_SECRET_KEY is required with REDIS_URL" in result.stderr


def test_a_malformed_switch_names_the_variable():
    result = manage("check", **{**PRODUCTION, "CRS_HTTPS": "yes please"})
    assert "CRS_HTTPS='yes please': use true or false" in result.stderr


def test_a_pool_size_below_one_names_the_variable():
    result = manage("check", **{**PRODUCTION, "CRS_DB_POOL_SIZE": "0"})
    assert result.returncode != 0
    assert "CRS_DB_POOL_SIZE=0: use a whole number of 1 or more" in result.stderr
