"""Django settings. The environment is read here and only here, through strict parsers.

Two modes, chosen by the environment (DESIGN.md "Two ways to run"):
* embedded default (no REDIS_URL): SQLite, kombu's in-process `memory://` broker and a
  thread-safe in-memory channel layer; everything runs in `manage.py runembedded`;
* distributed (REDIS_URL, usually with DATABASE_URL): Redis as Celery broker and
  channel layer, PostgreSQL, separate web / worker / beat processes.
"""

import ipaddress
import os
import secrets
import sys
from datetime import timedelta
from pathlib import Path
from urllib.parse import unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP
from kombu import Queue

import crs.sources.proxmox

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name, "").strip().lower()
    if value not in ("", "1", "0", "true", "false"):
        raise ImproperlyConfigured(f"{name}={value!r}: use true or false")
    return default if not value else value in ("1", "true")


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    if not value.isdigit():
        raise ImproperlyConfigured(f"{name}={value!r}: use a whole number of 0 or more")
    return int(value)


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def env_networks(name: str, default: str) -> list:
    """A comma-separated list of addresses or networks (CIDR), e.g. 10.0.0.0/8,192.0.2.7."""
    networks = []
    for item in env_list(name, default):
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError as exc:
            raise ImproperlyConfigured(f"{name}: {item!r} is not an address or network (CIDR): {exc}") from exc
    return networks


def database_config(url: str) -> dict:
    """One DATABASES entry from a URL: postgres://user:pass@host:port/name or sqlite:///path."""
    parts = urlsplit(url)
    if parts.scheme in ("postgres", "postgresql"):
        name = parts.path.lstrip("/")
        if not name:
            raise ImproperlyConfigured(f"DATABASE_URL={url!r}: name the database after the last /")
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(name),
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "",
            "PORT": str(parts.port or ""),
            # A bounded pool per process (README "Sizing the database pool"): under ASGI every
            # request thread used to keep a connection of its own, and a burst exhausted the
            # server's max_connections for every process. The pool needs CONN_MAX_AGE=0; a
            # connection is checked before it is handed out, so one broken by a database
            # restart is replaced instead of failing a request.
            "CONN_MAX_AGE": 0,
            "CONN_HEALTH_CHECKS": True,
            # pg_stat_activity names the process (crs-daphne, crs-celery) each connection serves.
            "OPTIONS": {"pool": database_pool(), "application_name": f"crs-{Path(sys.argv[0]).name}"[:63]},
        }
    if parts.scheme == "sqlite":
        return sqlite_config(Path(unquote(parts.path)))
    raise ImproperlyConfigured(f"DATABASE_URL={url!r}: use postgres://... or sqlite:///path")


def database_pool() -> dict:
    """psycopg_pool options: at most CRS_DB_POOL_SIZE connections in this process; a request
    that finds them all busy waits up to CRS_DB_POOL_TIMEOUT seconds for one; a lost database
    is tried again every 2 s at most until it answers (see reconnect_again)."""
    size = env_int("CRS_DB_POOL_SIZE", 10)
    if size < 1:
        raise ImproperlyConfigured(f"CRS_DB_POOL_SIZE={size}: use a whole number of 1 or more")
    return {
        "min_size": 1,
        "max_size": size,
        "max_idle": 60,  # connections beyond min_size go back to the server after a burst
        "timeout": env_int("CRS_DB_POOL_TIMEOUT", 10),
        "reconnect_timeout": RECONNECT_ROUND,
        "reconnect_failed": reconnect_again,
    }


# psycopg_pool tries a lost connection again after 1, 2, 4, 8, 16 … s for reconnect_timeout
# (5 minutes by default): after a 20-s outage its next try could come 10 s after the database
# is back. Rounds of RECONNECT_ROUND seconds (tries after 0, 1, 3 and 5 s) end in
# reconnect_failed, which starts the next round at once.
RECONNECT_ROUND = 5.0


def reconnect_again(pool) -> None:
    """psycopg_pool's reconnect_failed: a round of tries gave up, so start the next at once
    (check() grows a pool short of connections), for as long as the database is away."""
    pool.check()


def sqlite_config(path: Path) -> dict:
    # The web server, the worker thread and beat all write; WAL lets reads go on during a
    # write, IMMEDIATE takes the write lock up front so transactions never deadlock on upgrade.
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": path,
        "OPTIONS": {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        },
    }


def secret_key(embedded: bool, debug: bool) -> str:
    """CRS_SECRET_KEY, or for the embedded mode (and debugging) a key generated once in var/.

    The embedded mode is one process on one machine, so a key file beside its database is
    as safe as the database and lets `make run` work out of the box. The distributed mode
    runs processes on several machines that must share one key: it has to be given.
    """
    if key := os.environ.get("CRS_SECRET_KEY"):
        return key
    if not (embedded or debug):
        raise ImproperlyConfigured(
            "CRS_SECRET_KEY is required with REDIS_URL (the distributed mode): "
            "give every web, worker and beat process the same long random value"
        )
    path = VAR_DIR / "secret-key"
    if not path.exists():
        VAR_DIR.mkdir(exist_ok=True)
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


REDIS_URL = os.environ.get("REDIS_URL", "")
DEBUG = env_bool("CRS_DEBUG", False)
SECRET_KEY = secret_key(embedded=not REDIS_URL, debug=DEBUG)
ALLOWED_HOSTS = env_list("CRS_ALLOWED_HOSTS", "127.0.0.1,localhost")
CSRF_TRUSTED_ORIGINS = env_list("CRS_CSRF_TRUSTED_ORIGINS", "")

# Served over HTTPS (CRS_HTTPS=true): cookies only over TLS, redirect plain HTTP, and HSTS.
# Off by default because `make run` serves http://127.0.0.1. Behind a proxy that terminates
# TLS, CRS_BEHIND_PROXY=true trusts its X-Forwarded-Proto header (and only then).
HTTPS = env_bool("CRS_HTTPS", False)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = HTTPS
SECURE_SSL_REDIRECT = env_bool("CRS_SSL_REDIRECT", HTTPS)
SECURE_HSTS_SECONDS = env_int("CRS_HSTS_SECONDS", 31536000 if HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("CRS_HSTS_INCLUDE_SUBDOMAINS", HTTPS)
SECURE_HSTS_PRELOAD = env_bool("CRS_HSTS_PRELOAD", HTTPS)
# What the operator turned off on purpose over HTTPS (a proxy that redirects, subdomains still
# on plain HTTP) is not a deployment warning: `check --deploy` stays clean for what is left.
SILENCED_SYSTEM_CHECKS = [
    check
    for check, name in (
        ("security.W008", "CRS_SSL_REDIRECT"),
        ("security.W005", "CRS_HSTS_INCLUDE_SUBDOMAINS"),
        ("security.W021", "CRS_HSTS_PRELOAD"),
    )
    if HTTPS and os.environ.get(name, "").strip() and not env_bool(name, True)
]
if env_bool("CRS_BEHIND_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]  # load balancers probe over plain HTTP

INSTALLED_APPS = [
    "daphne",  # first: its runserver replaces Django's (system check daphne.E001)
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_celery_beat",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI's files, served from the installed package: no CDN
    "axes",
    "dashboard",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Static files before sessions and login: compressed, hashed, cached (dashboard/staticfiles.py).
    "dashboard.staticfiles.StaticFiles",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Every page needs a login unless its view says otherwise (the login page, /healthz,
    # and the JSON API, which answers 401 itself instead of redirecting).
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",  # last: it answers a locked-out login with the lockout page
]

# Login throttling (django-axes), on the login page and /admin/login/ alike: after
# CRS_LOGIN_FAILURE_LIMIT failed logins for one username, or from one address, that username
# or address is refused for CRS_LOGIN_LOCKOUT_MINUTES (429, registration/locked_out.html), and
# the audit trail records "login-locked-out". `manage.py axes_reset` lifts every lockout.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = env_int("CRS_LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("CRS_LOGIN_LOCKOUT_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]  # each on its own, not the pair
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
# Behind reverse proxies the address is read from X-Forwarded-For, and only then: the number
# of proxies in front of daphne, each appending to the header (dashboard/logins.client_address).
CRS_TRUSTED_PROXY_COUNT = env_int("CRS_TRUSTED_PROXY_COUNT", 0)
AXES_CLIENT_IP_CALLABLE = "dashboard.logins.client_address"

# Content-Security-Policy: the pages run only the scripts served from here (dashboard.js,
# Plotly from its installed package), talk only to this origin (API and WebSocket), and may
# not be framed. Styles may be inline: Plotly writes its chart styles into <style> elements.
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF, CSP.UNSAFE_INLINE],
    "img-src": [CSP.SELF, "data:"],
    "connect-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.SELF],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}

ROOT_URLCONF = "project.urls"
CSRF_FAILURE_VIEW = "dashboard.pages.errors.csrf_failure"  # JSON under /api/
ASGI_APPLICATION = "project.asgi.application"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# The REST API (dashboard/api/): tokens or the session, the roles' permissions, errors naming the field.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "dashboard.api.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PARSER_CLASSES": [
        "dashboard.api.parsers.StrictJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_SCHEMA_CLASS": "dashboard.api.schema.Schema",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    "EXCEPTION_HANDLER": "dashboard.api.base.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "crs API",
    "DESCRIPTION": "Clusters, rounds, recommendations, migrations, settings and the audit trail. "
    "Fractions are 0–1; authenticate with `Authorization: Bearer <token>` or the page's session. "
    "[← Back to the dashboard](/)",
    # Operations grouped by what they act on (clusters, recommendations, migrations, …), the
    # path's first part after /api/v1/: without it all sat in one "v1" group.
    "SCHEMA_PATH_PREFIX": r"/api/v[0-9]+",
    "VERSION": "1",
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "COMPONENT_SPLIT_REQUEST": True,
    "SERVE_INCLUDE_SCHEMA": False,
}

DATABASE_URL = os.environ.get("DATABASE_URL", "")
DATABASES = {"default": database_config(DATABASE_URL) if DATABASE_URL else sqlite_config(VAR_DIR / "crs.sqlite3")}
# HTTP requests inside Django at once (one connection each), and how long one waits for its
# turn before a 503: project/admission.py.
REQUESTS_AT_ONCE = DATABASES["default"].get("OPTIONS", {}).get("pool", {}).get("max_size", 10)
REQUEST_QUEUE_TIMEOUT = env_int("CRS_REQUEST_QUEUE_TIMEOUT", 60)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_TZ = True
USE_I18N = False

STATIC_URL = "static/"
# Where collectstatic writes and WhiteNoise reads (CRS_STATIC_ROOT): one per server process group,
# since collectstatic re-writes hashed files in place while another server would be reading them.
STATIC_ROOT = Path(os.environ.get("CRS_STATIC_ROOT") or VAR_DIR / "static")
STATICFILES_DIRS = [BASE_DIR / "static"]
# Hashed names and .gz/.br copies written by collectstatic (runembedded runs it; `make web` too).
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "dashboard.staticfiles.StaticStorage"},
}

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard:home"
LOGOUT_REDIRECT_URL = "login"

# Longer than channels-redis's blocking read (5 s) so that an idle read never times out.
REDIS_SOCKET_TIMEOUT = 30


def channel_prefix(url: str) -> str:
    """The live pages' pub/sub channel names carry the Redis database number: pub/sub is
    server-wide, not per database, so two installations on one Redis server with their own
    database numbers (as Celery's queues are kept apart) showed each other's rounds, and one's
    burst overran the other's subscription buffer until Redis dropped it."""
    from redis.connection import parse_url

    return f"crs{parse_url(url).get('db', 0)}"


if REDIS_URL:
    CHANNEL_LAYERS = {
        # redis-py's async pool refuses (not queues) past max_connections, 100 by default; every
        # page's join is a command, and after a web restart all pages reconnect at once.
        # Pub/sub: one publish per event, fanned out inside each web process (dashboard/live/layers.py).
        "default": {
            "BACKEND": "dashboard.live.layers.RedisBroadcastChannelLayer",
            # socket_timeout: redis-py 8 gives every socket 5 s, exactly channels-redis's blocking
            # read (brpop_timeout, 5 s) of its list layer; each idle read then raced the timeout
            # and the consumer's socket closed with 1011 every 10-19 s. A silent dead server is
            # still noticed.
            "CONFIG": {
                "hosts": [
                    {
                        "address": REDIS_URL,
                        "max_connections": 2000,
                        "socket_timeout": REDIS_SOCKET_TIMEOUT,
                        "socket_keepalive": True,
                    }
                ],
                "prefix": channel_prefix(REDIS_URL),
            },
        }
    }
    CELERY_BROKER_URL = REDIS_URL
    CELERY_BROKER_TRANSPORT = "project.broker:Transport"  # kombu's, reconnecting in place (its docstring)
    # Shared by every process: the overview's push window (tasks.overview_changed) is one for
    # all workers. Short timeouts: with Redis away a round waits a second at most for it.
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "dashboard.live.layers.ThreadSafeInMemoryChannelLayer"}}
    # The in-process transport ignores the host; naming one keeps kombu from warning at start-up
    # "No hostname was supplied. Reverting to default 'localhost'", which reads as a misconfiguration.
    CELERY_BROKER_URL = "memory://localhost/"

CELERY_TASK_IGNORE_RESULT = True
# A task is acknowledged when it ends, not when it starts: a worker killed mid-task leaves
# the message to be delivered again, and every task is written to be safe to run twice.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# With Redis, a message a dead worker held comes back after this many seconds. It must
# exceed the longest task (an adapter call) and countdown (a second), yet keep a migration
# from waiting long for its follower.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("CRS_TASK_VISIBILITY_TIMEOUT", 300)}
# Two queues, both consumed by every worker unless told otherwise (`-Q`): the live clusters'
# ("celery") and the read-only what-if clusters' collects and rounds ("whatif", dashboard.models.Cluster.task_queue),
# taken in turn, so a heavy imported snapshot cannot delay the live rounds.
# Proxmox clusters' collects have a third ("proxmox", Cluster.collect_queue), served by a worker
# of threads (`make worker-proxmox`): a collect waits on the network, and a thread waits without
# holding a process or delaying a round.
CELERY_TASK_QUEUES = [Queue("celery"), Queue("whatif"), Queue("proxmox")]
# One message at a time per worker process: a process busy with a long round does not sit on
# other clusters' messages meanwhile (fairness between clusters and queues).
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_BEAT_SCHEDULER = "dashboard.beat:PhasedScheduler"  # each cluster at its own phase
# Beat reads the per-cluster PeriodicTask rows; it must notice a changed round interval
# within a few seconds, and short demo intervals need it to wake up often.
CELERY_BEAT_MAX_LOOP_INTERVAL = 1
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

# The demo admin's password for `make run`; generated and printed when empty.
CRS_ADMIN_PASSWORD = os.environ.get("CRS_ADMIN_PASSWORD", "")
# Proxmox VE connection defaults (CRS_PVE_HOST, CRS_PVE_PORT, CRS_PVE_TOKEN, CRS_PVE_VERIFY_SSL), so the
# API token can stay out of the database; a cluster's own source settings override them.
CRS_PVE_DEFAULTS = crs.sources.proxmox.config_from_env(os.environ)
# Fernet keys for the token secrets stored in the database (dashboard/crypt.py): the first
# encrypts, all decrypt; without any, a key derived from SECRET_KEY does both.
CRS_FERNET_KEYS = env_list("CRS_FERNET_KEYS", "")

# /metrics (dashboard/api/metrics.py): open to these networks (loopback by default) and to this bearer token.
CRS_METRICS_ALLOW = env_networks("CRS_METRICS_ALLOW", "127.0.0.0/8,::1")
CRS_METRICS_TOKEN = os.environ.get("CRS_METRICS_TOKEN", "")

# How much of the trend a page load shows (the range selector fetches more from the API).
CRS_HISTORY_SHOW_HOURS = 3
# The history's tiers (dashboard/history.py): rounds, node and guest samples are kept as they
# come for CRS_HISTORY_RAW_HOURS (guests as 1-minute means), then as 5-minute means until
# CRS_HISTORY_FIVE_MINUTE_DAYS, then as hourly means until CRS_HISTORY_HOURLY_DAYS; then dropped.
CRS_HISTORY_RAW = timedelta(hours=env_int("CRS_HISTORY_RAW_HOURS", 24))
CRS_HISTORY_FIVE_MINUTE = timedelta(days=env_int("CRS_HISTORY_FIVE_MINUTE_DAYS", 7))
CRS_HISTORY_HOURLY = timedelta(days=env_int("CRS_HISTORY_HOURLY_DAYS", 90))
if not CRS_HISTORY_RAW < CRS_HISTORY_FIVE_MINUTE < CRS_HISTORY_HOURLY:
    raise ImproperlyConfigured(
        "CRS_HISTORY_RAW_HOURS, CRS_HISTORY_FIVE_MINUTE_DAYS, CRS_HISTORY_HOURLY_DAYS: "
        "each tier must outlast the one before"
    )
# Downsampling runs every minute, from beat (and the embedded runner's beat) alike.
CELERY_BEAT_SCHEDULE = {"downsample-history": {"task": "dashboard.tasks.downsample_history", "schedule": 60.0}}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("CRS_LOG_LEVEL", "INFO")},
    # Every few seconds a round would log "received"/"succeeded" twice; keep the console readable.
    "loggers": {
        name: {"level": "WARNING"}
        for name in (
            "daphne",
            "django.channels.server",
            "celery.app.trace",
            "celery.worker.strategy",
            "celery.beat",
            "kombu.transport.memory",
            "celery.worker.consumer.connection",
        )
    },
}
