"""The shared cache on Redis, failing soft: a Redis outage is a cache miss, not a failed request.

Everything memoryhub keeps in the cache can be recomputed (resolved API keys, throttle
counters, query embeddings), so while Redis is away reads return the default, writes
are dropped, and the API goes on serving from PostgreSQL. Rate limits are not enforced
meanwhile (their counters live in Redis). A warning is logged at most once a minute.
"""

from __future__ import annotations

import functools
import logging
import time

from django.core.cache.backends.redis import RedisCache
from redis.exceptions import ConnectionError as RedisConnectionError, TimeoutError as RedisTimeoutError

logger = logging.getLogger(__name__)

_UNAVAILABLE = (RedisConnectionError, RedisTimeoutError, OSError)
_WARN_EVERY = 60.0
_last_warning = 0.0


def _warn(exc: Exception) -> None:
    global _last_warning
    now = time.monotonic()
    if now - _last_warning > _WARN_EVERY:
        _last_warning = now
        logger.warning("cache unavailable (Redis): %s; serving without it", exc)


def _soft(fallback):
    """Run the cache operation; when Redis is unreachable, return `fallback(*args, **kwargs)`."""

    def decorate(method):
        @functools.wraps(method)
        def wrapper(self, *args, **kwargs):
            try:
                return method(self, *args, **kwargs)
            except _UNAVAILABLE as exc:
                _warn(exc)
                return fallback(*args, **kwargs)

        return wrapper

    return decorate


def _default(key, default=None, *args, **kwargs):
    return default


def _none(*args, **kwargs):
    return None


def _false(*args, **kwargs):
    return False


def _empty(*args, **kwargs):
    return {}


def _unsaved(data, *args, **kwargs):
    return list(data)


class FailSoftRedisCache(RedisCache):
    """Django's Redis cache; an unreachable Redis reads as empty and swallows writes."""

    get = _soft(_default)(RedisCache.get)
    get_many = _soft(_empty)(RedisCache.get_many)
    set = _soft(_none)(RedisCache.set)
    set_many = _soft(_unsaved)(RedisCache.set_many)
    add = _soft(_false)(RedisCache.add)
    touch = _soft(_false)(RedisCache.touch)
    delete = _soft(_false)(RedisCache.delete)
    delete_many = _soft(_none)(RedisCache.delete_many)
    has_key = _soft(_false)(RedisCache.has_key)
    clear = _soft(_false)(RedisCache.clear)

    def incr(self, key, delta=1, version=None):
        try:
            return super().incr(key, delta, version)
        except _UNAVAILABLE as exc:
            _warn(exc)
            raise ValueError(f"Key {key!r} not found (cache unavailable).") from exc
