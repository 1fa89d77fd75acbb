"""The heartbeat: the Redis key ``{prefix}:{app}:hb:{executorId}``, rewritten every interval with a PX TTL.

The key and the app's heartbeat index are written by the contract's one Lua script, so the plane reads a
Python executor exactly as a TypeScript one. One beat is bounded by its interval (socket timeouts), a miss
is never fatal, and a heartbeat unwritten for a whole TTL is logged loudly (``heartbeat_lost``). Its own
daemon thread: DBOS's threads, a busy GIL holder or a slow database never delay it beyond a beat.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Callable, Dict, Optional

from .contract import WRITE_HEARTBEAT_LUA, heartbeat_index_key, heartbeat_key, index_marker_key
from .log import KitLog


def create_redis(url: str, tls_ca: Optional[str], timeout_s: float) -> Any:
    import redis  # the one dependency a DBOS app does not already have

    kwargs: Dict[str, Any] = {"socket_timeout": timeout_s, "socket_connect_timeout": max(timeout_s, 1.0),
                              "health_check_interval": 0}
    if tls_ca:
        kwargs["ssl_ca_data"] = tls_ca
    return redis.Redis.from_url(url, **kwargs)


class Heartbeat:
    def __init__(self, redis_client: Any, *, application_name: str, executor_id: str, prefix: str, ttl_ms: int,
                 interval_ms: int, value: Callable[[], Dict[str, Any]], log: KitLog) -> None:
        self.redis = redis_client
        self.ttl_ms = ttl_ms
        self.interval_ms = interval_ms
        self.value = value
        self.log = log
        self.keys = [heartbeat_key(application_name, executor_id, prefix), heartbeat_index_key(application_name, prefix),
                     index_marker_key(application_name, prefix)]
        self.executor_id = executor_id
        self._script = redis_client.register_script(WRITE_HEARTBEAT_LUA)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._stopped = False
        self._thread: Optional[threading.Thread] = None
        self._last_ok = time.monotonic()
        self._lost = False
        self._last_warn = 0.0
        self._failures = 0
        self.lost_count = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="afterlife-heartbeat", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        every = self.interval_ms / 1000.0
        next_at = time.monotonic() + every
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            next_at += every
            # A beat that overran does not pile up the next ones.
            if next_at < time.monotonic():
                next_at = time.monotonic() + every
            self.beat()

    def beat(self) -> bool:
        """Writes one beat now; nothing is written once stop() began (the key's DEL is the last word)."""
        with self._lock:
            if self._stopped:
                return False
            try:
                v = json.dumps(self.value(), separators=(",", ":"), ensure_ascii=False)
                self._script(keys=self.keys, args=[v, self.ttl_ms, self.executor_id])
            except Exception as e:  # noqa: BLE001 - a miss is never fatal
                self._failed(e)
                return False
            if self._lost:
                self.log.notice("heartbeat written again", silentMs=int((time.monotonic() - self._last_ok) * 1000),
                                event="heartbeat_restored")
                self._lost = False
            self._last_ok = time.monotonic()
            return True

    def _failed(self, err: BaseException) -> None:
        silent_ms = int((time.monotonic() - self._last_ok) * 1000)
        self._failures += 1
        if time.monotonic() - self._last_warn >= 1.0:
            self.log.warn("heartbeat write failed; the next beat retries", err=err, silentMs=silent_ms,
                          failures=self._failures, event="heartbeat_failed")
            self._last_warn = time.monotonic()
            self._failures = 0
        if not self._lost and silent_ms >= self.ttl_ms:
            self._lost = True
            self.lost_count += 1
            self.log.error("heartbeat not written for a whole TTL: only the liveness lock now vouches for this executor",
                           silentMs=silent_ms, ttlMs=self.ttl_ms, lostCount=self.lost_count, event="heartbeat_lost")

    def stop(self) -> None:
        """Stops beating and deletes the key and its index entry: deleted is a clean exit, expired a crash."""
        self._stop.set()
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            try:
                pipe = self.redis.pipeline(transaction=True)
                pipe.delete(self.keys[0])
                pipe.zrem(self.keys[1], self.executor_id)
                pipe.execute()
            except Exception as e:  # noqa: BLE001
                self.log.warn("heartbeat delete failed; it expires with its TTL", err=e)
