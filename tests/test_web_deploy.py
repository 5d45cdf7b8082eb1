"""Production settings come from the environment, and Django's deployment check passes on them."""

import os
import secrets
import subprocess
import sys

import pytest

from harness.stack import ROOT

# The environment README's production section asks for (distributed mode, served over HTTPS).
PRODUCTION = {
    "DJANGO_SETTINGS_MODULE": "dashboard.settings",
    "REDIS_URL": "redis://127.0.0.1:6379/9",
    "DATABASE_URL": "postgres://crs@db.example.com/crs",
    "CRS_SECRET_KEY": secrets.token_urlsafe(50),
    "CRS_ALLOWED_HOSTS": "crs.example.com",
    "CRS_HTTPS": "true",
}
# Behind a proxy that ends TLS and redirects plain HTTP itself.
BEHIND_PROXY = {**PRODUCTION, "CRS_BEHIND_PROXY": "true", "CRS_SSL_REDIRECT": "false"}


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


@pytest.mark.parametrize("environment", [PRODUCTION, BEHIND_PROXY], ids=["https", "behind-proxy"])
def test_check_deploy_is_clean_with_the_production_environment(environment):
    result = manage("check", "--deploy", "--fail-level", "WARNING", **environment)
    assert result.returncode == 0, result.stderr
    assert "System check identified no issues" in result.stdout


def test_compose_refuses_to_start_without_the_secret_key_and_admin_password():
    compose = (ROOT / "docker-compose.yml").read_text()
    assert "CRS_SECRET_KEY: ${CRS_SECRET_KEY:?" in compose
    assert "CRS_ADMIN_PASSWORD: ${CRS_ADMIN_PASSWORD:?" in compose


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


@pytest.mark.django_db
def test_pages_carry_a_content_security_policy_allowing_only_their_own_scripts(client):
    policy = client.get("/accounts/login/")["Content-Security-Policy"]
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    assert directives["script-src"] == "'self'"
    assert directives["connect-src"] == "'self'" and directives["frame-ancestors"] == "'none'"
