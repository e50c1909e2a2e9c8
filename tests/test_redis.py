"""With REDIS_URL set: readiness checks the broker, and rate limits are shared through Redis."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.redis


@pytest.fixture
def redis_settings(settings, redis_url):
    settings.REDIS_URL = redis_url
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": redis_url}}
    from django.core.cache import cache

    cache.clear()
    yield settings
    cache.clear()


@pytest.mark.django_db
def test_readyz_reports_the_broker(client, redis_settings):
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json()["checks"] == {"database": "ok", "broker": "ok"}


@pytest.mark.django_db
def test_rate_limit_counters_live_in_redis(world, redis_settings):
    import redis

    redis_settings.MEMORYHUB_RATE_LIMIT = "2/min"
    client = world.client()
    assert client.get("/v1/me").status_code == 200
    assert client.get("/v1/me").status_code == 200
    assert client.get("/v1/me").status_code == 429
    keys = redis.Redis.from_url(redis_settings.REDIS_URL).keys("*throttle_api-key_*")
    assert keys, "the throttle history should be stored in Redis"
