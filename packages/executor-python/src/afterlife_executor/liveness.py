"""The liveness lease: a session advisory lock on a psycopg connection of the kit's own.

The server ends the session — freeing the lock — once the process has sent nothing for the lease
(``idle_session_timeout``), so the lock means "this process spoke within the lease" through any proxy. The kit
speaks on it every ``LIVENESS_RENEW_EVERY_MS``, which is what renews it: an empty query (one round trip, nothing
parsed or planned), and every ``FENCE_EVERY``-th time the fence question instead (``LIVENESS_FENCE_EVERY_MS``, a
backstop: psycopg prepares a statement it has run five times, so the question is then only bound and executed).
The question is also asked at every (re)connect, before the lock, and at once on a NOTIFY on the fence channel
naming this executor, which the plane sends when it declares it dead or a new incarnation supersedes it (a hint
only: anyone who can connect may send one). The session is proven to be one server session before anything
session-level lands on it (a transaction-mode pooler would keep the lock after the process died). The same
session hears recoveries asking this executor to claim their work now, and drain requests for its application.

One daemon thread owns the connection (psycopg connections are not shared between threads here). A lost
connection is re-made with a bounded backoff, one at a time; failures are logged at most once a minute.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime
from typing import Any, Callable, Dict, Optional, Tuple

from . import sql
from .contract import (
    LIVENESS_FENCE_EVERY_MS,
    LIVENESS_RENEW_EVERY_MS,
    MIN_LIVENESS_LEASE_MS,
    Fence,
    RequeuedNotice,
    drain_channel,
    effective_lease,
    fence_channel,
    liveness_session_name,
    requeued_channel,
)
from .log import KitLog, Throttle

RENEW_EVERY_S = LIVENESS_RENEW_EVERY_MS / 1000
# Renewals per fence question when nothing hinted one.
FENCE_EVERY = max(1, round(LIVENESS_FENCE_EVERY_MS / LIVENESS_RENEW_EVERY_MS))
RECONNECT_MIN_S = 0.1
# Bounded: after a Postgres restart the lock must be back well within the reaper's settle time (10 s).
RECONNECT_MAX_S = 5.0
# Fence questions between two comparisons of the session's backend with the one proven at connect.
IDENTITY_EVERY = 5
CLOSE_SLICE_S = 0.1
KEEPALIVES = ("SET tcp_keepalives_idle = 5; SET tcp_keepalives_interval = 2; SET tcp_keepalives_count = 3; "
              "SET tcp_user_timeout = 10000; SET statement_timeout = 5000")


class NotOneSessionError(RuntimeError):
    def __init__(self, why: str) -> None:
        super().__init__(
            f"the liveness connection is not one Postgres session: {why}. A pooler in transaction mode sits between "
            "the kit and Postgres; the liveness lock would stay on a pooled session after this process dies, and its "
            "death would go unseen. Set AFTERLIFE_LIVENESS_DATABASE_URL (option liveness_database_url) to a direct "
            "route to Postgres or to a session-mode pooler; DBOS's own URL may stay pooled"
        )


def connect(url: str, application_name: str, **extra: Any) -> Any:
    import psycopg

    return psycopg.connect(url, application_name=application_name[:63], connect_timeout=2, autocommit=True,
                           keepalives=1, keepalives_idle=5, keepalives_interval=2, keepalives_count=3, **extra)


def prove_one_session(conn: Any, url: str, probe_name: str) -> Tuple[int, str]:
    """The liveness session's backend, or NotOneSessionError when a pooler moves it (sessionProbe.ts's test)."""
    first = sql.backend_identity(conn)
    try:
        probe = connect(url, probe_name, autocommit=False)
    except Exception:
        # No probe, no evidence either way; the periodic comparison keeps watching.
        return first
    try:
        try:
            other = sql.backend_identity(probe)  # inside a transaction: a transaction pooler must pin a backend
        except Exception as e:
            if "statement" in str(e).lower() and "mode" in str(e).lower():
                raise NotOneSessionError(f"the pooler refused a transaction ({e})") from e
            return first
        if other == first:
            raise NotOneSessionError(f"a second connection was handed its backend {first[0]} while it was still open")
        again = sql.backend_identity(conn)
        if again != first:
            raise NotOneSessionError(f"its statements ran on backend {first[0]}, then on backend {again[0]}")
        return first
    finally:
        try:
            probe.close()
        except Exception:
            pass


class LivenessLock:
    def __init__(self, *, database_url: str, application_name: str, executor_id: str, afterlife_schema: str,
                 since: datetime, incarnation: str, lease_ms: int, log: KitLog, throttle: Throttle,
                 register: Callable[[], None], on_fenced: Callable[[Dict[str, Any]], None],
                 on_requeued: Optional[Callable[[Dict[str, Any]], None]], on_lease: Callable[[int], None],
                 on_drain_hint: Optional[Callable[[], None]] = None) -> None:
        self.url = database_url
        self.app = application_name
        self.executor_id = executor_id
        self.schema = afterlife_schema
        self.since = since
        self.incarnation = incarnation
        self.configured_lease_ms = lease_ms
        self.lease_ms = lease_ms
        self.log = log
        self.throttle = throttle
        self.register = register
        self.on_fenced = on_fenced
        self.on_requeued = on_requeued
        self.on_lease = on_lease
        self.on_drain_hint = on_drain_hint
        self.held = False
        self.refused: Optional[NotOneSessionError] = None
        self._registered = False
        self._conn: Any = None
        self._backend: Optional[Tuple[int, str]] = None
        self._checks = 0
        self._since_fence = 0
        self._closed = threading.Event()
        self._first_attempt = threading.Event()
        self._ask_now = False
        self._warned_busy = False
        self._lease_logged = False
        self._thread: Optional[threading.Thread] = None
        self._fence_ch = fence_channel(afterlife_schema)
        self._requeued_ch = requeued_channel(afterlife_schema)
        self._drain_ch = drain_channel(afterlife_schema)

    def start(self, timeout_s: float = 3.0) -> None:
        """Starts the thread and waits (bounded) for its first attempt; a session that is not one is refused."""
        self._thread = threading.Thread(target=self._run, name="afterlife-liveness", daemon=True)
        self._thread.start()
        self._first_attempt.wait(timeout_s)
        if self.refused is not None:
            raise self.refused

    def _run(self) -> None:
        try:
            self._loop()
        finally:
            self._drop()

    def _loop(self) -> None:
        backoff = RECONNECT_MIN_S
        next_check = time.monotonic()
        while not self._closed.is_set():
            if self._conn is None:
                try:
                    self._open()
                    backoff = RECONNECT_MIN_S
                    next_check = time.monotonic() + RENEW_EVERY_S
                    self.throttle.ok("liveness")
                except NotOneSessionError as e:
                    self.refused = e
                    self._drop()
                    if self._first_attempt.is_set():
                        self.log.error("liveness lock given up: its connection is not one Postgres session (a "
                                       "transaction-mode pooler)", err=e, event="liveness_not_a_session")
                    self._first_attempt.set()
                    return
                except _Fenced:
                    self._first_attempt.set()
                    return
                except Exception as e:  # noqa: BLE001
                    self._drop()
                    self._first_attempt.set()
                    self.throttle.report("liveness", e, retryInMs=int(backoff * 1000))
                    if self._closed.wait(backoff):
                        return
                    backoff = min(RECONNECT_MAX_S, backoff * 2)
                    continue
                self._first_attempt.set()
            try:
                # Short slices: close() is noticed within one, and only this thread ever touches the connection.
                wait = min(CLOSE_SLICE_S, max(0.0, next_check - time.monotonic()))
                for n in self._conn.notifies(timeout=wait, stop_after=1):
                    self._notified(n.channel, n.payload)
                if self._ask_now or time.monotonic() >= next_check:
                    if not self._ask_now:
                        self._since_fence += 1
                    ask_fence = self._ask_now or self._since_fence >= FENCE_EVERY
                    self._ask_now = False
                    next_check = time.monotonic() + RENEW_EVERY_S
                    self._check(ask_fence)
            except NotOneSessionError as e:
                self.refused = e
                self._drop()
                self.log.error("liveness lock given up: its connection is not one Postgres session (a "
                               "transaction-mode pooler)", err=e, event="liveness_not_a_session")
                return
            except _Fenced:
                return
            except Exception as e:  # noqa: BLE001
                if self._closed.is_set():
                    return
                self._drop()
                self.throttle.report("liveness", e, retryInMs=int(backoff * 1000))

    def _open(self) -> None:
        conn = connect(self.url, liveness_session_name(self.executor_id, self.incarnation))
        self._conn = conn
        self.held = False
        self._backend = prove_one_session(conn, self.url, f"afterlife_probe_{self.executor_id}")
        self._checks = 0
        self._lease(conn)
        # LISTEN before the fence question, so a declaration committed in between is still heard.
        conn.execute(f'LISTEN "{self._fence_ch}"')
        if self.on_requeued is not None:
            conn.execute(f'LISTEN "{self._requeued_ch}"')
        if self.on_drain_hint is not None:
            conn.execute(f'LISTEN "{self._drain_ch}"')
        if not self._registered:
            self.register()
            self._registered = True
        self._fence(conn)
        self._since_fence = 0
        self._take(conn)

    def _lease(self, conn: Any) -> None:
        inherited = sql.idle_session_timeout_ms(conn)
        lease_ms, how = effective_lease(self.configured_lease_ms, inherited)
        conn.execute(f"{KEEPALIVES}; SET idle_session_timeout = {int(lease_ms)}")
        self.lease_ms = lease_ms
        self.on_lease(sql.idle_session_timeout_ms(conn))
        if self._lease_logged:
            return
        self._lease_logged = True
        if how == "kept":
            self.log.notice("liveness lease: keeping the shorter idle_session_timeout set on the URL, role or database",
                            leaseMs=lease_ms, configuredMs=self.configured_lease_ms, event="liveness_lease")
        elif how == "unsafe":
            self.log.warn(f"liveness lease: the idle_session_timeout set on the URL, role or database ({inherited} ms) "
                          f"is below {MIN_LIVENESS_LEASE_MS} ms, too short for the kit to keep; using the configured lease",
                          leaseMs=lease_ms, inheritedMs=inherited, event="liveness_lease")
        elif how == "longer":
            self.log.info("liveness lease: the longer idle_session_timeout of the URL, role or database is replaced by "
                          "the lease on this session", leaseMs=lease_ms, inheritedMs=inherited, event="liveness_lease")

    def _take(self, conn: Any) -> None:
        self.held = sql.take_liveness(conn, self.schema, application_name=self.app, executor_id=self.executor_id,
                                      incarnation=self.incarnation)
        if self.held:
            self._warned_busy = False
        elif not self._warned_busy:
            self._warned_busy = True
            self.log.warn("liveness lock held by another session (an old one of ours, ended by the server within a "
                          "lease, a second process with this executor ID, or a squatter); retrying",
                          event="liveness_lock_busy")

    def _check(self, ask_fence: bool) -> None:
        """The periodic word, which renews the lease: the fence question when due or hinted, else an empty query;
        a lock that was busy is asked for again either way (that statement renews too)."""
        conn = self._conn
        if ask_fence:
            self._since_fence = 0
            self._checks += 1
            if self._checks >= IDENTITY_EVERY and self._backend is not None:
                self._checks = 0
                now = sql.backend_identity(conn)
                if now != self._backend:
                    raise NotOneSessionError(f"its statements ran on backend {self._backend[0]}, then on backend {now[0]}")
            self._fence(conn)
        if not self.held:
            self._take(conn)
        elif not ask_fence:
            # psycopg sends it as it is (the simple protocol): an EmptyQueryResponse, nothing parsed or logged.
            conn.execute("")

    def _fence(self, conn: Any) -> None:
        raw = sql.ask_fence(conn, self.schema, application_name=self.app, executor_id=self.executor_id,
                            since=self.since, incarnation=self.incarnation)
        if raw is None:
            return
        ok, fence = Fence.safe_parse(raw if isinstance(raw, dict) else json.loads(raw))
        if not ok:
            # An answer the contract does not know is still an answer: stopping is the safe reading.
            fence = {"verdict": "dead", "reason": f"unreadable fence answer: {raw!r}"[:200]}
        self.on_fenced(fence)
        raise _Fenced()

    def _notified(self, channel: str, payload: str) -> None:
        if channel == self._requeued_ch and payload and self.on_requeued is not None:
            try:
                ok, notice = RequeuedNotice.safe_parse(json.loads(payload))
            except ValueError:
                return
            if not ok:
                self.log.debug("requeued notice ignored: not the contract")
                return
            if notice["applicationName"] == self.app and self.executor_id in notice["to"] and self.held:
                self.on_requeued(notice)
            return
        if (channel != self._fence_ch and channel != self._drain_ch) or not payload:
            return
        try:
            p = json.loads(payload)
        except ValueError:
            return
        if channel == self._drain_ch:
            # A drain hint costs one poll of the plane's table, whoever sent it.
            if isinstance(p, dict) and p.get("applicationName") == self.app and self.on_drain_hint is not None:
                self.on_drain_hint()
            return
        if isinstance(p, dict) and p.get("applicationName") == self.app and p.get("executorId") == self.executor_id:
            self._ask_now = True

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        self.held = False
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass

    def close(self, timeout_s: float = 0.5) -> None:
        """Releases the lock by ending the session (a clean exit reads like any other: the lock is free).

        The liveness thread closes its own connection (libpq's connection is not for two threads at once);
        this waits for it, bounded: at process exit the socket closes anyway.
        """
        self._closed.set()
        self.held = False
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)


class _Fenced(Exception):
    """The fence answered: the kit is stopping; the thread ends."""
