"""The heartbeat against a real Redis: the key, its TTL and the app's index, as the plane reads them."""

from __future__ import annotations

import json
import os
import secrets

import pytest

from afterlife_executor.contract import HeartbeatValue, heartbeat_index_key, heartbeat_key, index_marker_key
from afterlife_executor.heartbeat import Heartbeat, create_redis
from afterlife_executor.log import KitLog


@pytest.fixture()
def redis_client():  # type: ignore[no-untyped-def]
    r = create_redis(os.environ.get("AFTERLIFE_TEST_REDIS_URL", "redis://127.0.0.1:6379"), None, 1.0)
    yield r
    r.close()


def test_a_beat_writes_the_key_with_its_ttl_and_index_and_stop_deletes_both(redis_client) -> None:  # type: ignore[no-untyped-def]
    prefix = f"pytest-{secrets.token_hex(4)}"
    value = {"executorId": "exec-1", "applicationName": "agents", "applicationVersion": "v1", "state": "alive",
             "startedAt": "2026-12-06T04:00:00.000Z", "beatAt": "2026-12-06T04:00:01.000Z", "inFlight": 2,
             "beatEveryMs": 250, "ttlMs": 15_000}
    hb = Heartbeat(redis_client, application_name="agents", executor_id="exec-1", prefix=prefix, ttl_ms=15_000,
                   interval_ms=250, value=lambda: value, log=KitLog())
    try:
        assert hb.beat()
        raw = redis_client.get(heartbeat_key("agents", "exec-1", prefix))
        ok, parsed = HeartbeatValue.safe_parse(json.loads(raw))
        assert ok and parsed == value
        assert 14_000 < redis_client.pttl(heartbeat_key("agents", "exec-1", prefix)) <= 15_000
        assert redis_client.zscore(heartbeat_index_key("agents", prefix), "exec-1") is not None
        assert redis_client.get(index_marker_key("agents", prefix)) == b"1"
        hb.stop()
        assert redis_client.exists(heartbeat_key("agents", "exec-1", prefix)) == 0
        assert redis_client.zscore(heartbeat_index_key("agents", prefix), "exec-1") is None
        # Nothing is written once stop() began: the delete is the last word.
        assert not hb.beat()
        assert redis_client.exists(heartbeat_key("agents", "exec-1", prefix)) == 0
    finally:
        redis_client.delete(heartbeat_key("agents", "exec-1", prefix), heartbeat_index_key("agents", prefix),
                            index_marker_key("agents", prefix))
