"""The executor kit for DBOS Transact for Python: ``attach_executor()``, one call after ``DBOS.launch()``.

What the TypeScript kit does, on the same contract, with threads (DBOS for Python is thread-based):

    heartbeat.py  the Redis key, a beat every 250 ms (state + inFlight), kept until the end of a drain
    liveness.py   the liveness lock on a psycopg session of its own, the server-timed lease, the fence
    this module   registry and incarnation, SIGTERM drain inside Cloud Run's grace, planned drains,
                  the death notice for what is left, self-fencing (exit 75), kit facts, watched-or-told,
                  the requeued hint claimed through DBOS's own queue claim

Nothing here may crash the app: Redis, Postgres and Pub/Sub failures are logged (at most once a minute
each) and bounded. The process exits only where the contract says it must: a fence (75), the end of a
SIGTERM drain (0), a failed attach when ``fatal`` (78).
"""

from __future__ import annotations

import os
import secrets
import signal
import threading
import time
from datetime import datetime, timezone
from types import FrameType
from typing import Any, Callable, Dict, List, Literal, Mapping, Optional

from . import sql
from ._version import __version__
from .contract import (
    EXECUTOR_DEATH_TOPIC,
    FENCED_EXIT_CODE,
    GUARD_TICK_WITHIN_MS,
)
from .dbos_bridge import DbosApp, QueuePoller, launched_dbos
from .heartbeat import Heartbeat, create_redis
from .liveness import LivenessLock, NotOneSessionError, connect
from .log import KitLog, Throttle
from .sessions import name_dbos_sessions, unnamed_session_pids
from .options import ConfigError, KitOptions, read_variables, resolve_options
from .publish import RestPublisher, create_publisher, publish_death_notice

ATTACH_FAILED_EXIT_CODE = 78
CLOUD_RUN_GRACE_MS = 10_000
HARD_EXIT_BEFORE_GRACE_MS = 300
STEP_TIMEOUT_S = 1.0
DRAIN_POLL_S = 1.0
# While the liveness session listens, a drain request is heard as it is written (its NOTIFY): the poll is a backstop.
DRAIN_BACKSTOP_POLL_S = 5.0
WATCH_CHECK_EVERY_S = 5.0
WATCH_GRACE_S = 10.0
UNWATCHED_WARN_EVERY_S = 60.0

KitState = Literal["alive", "draining", "drained", "exiting"]


class ExecutorIdError(ConfigError):
    pass


def _exit(code: int, log: Optional[KitLog] = None) -> None:
    """Ends the process now: DBOS's workflow threads are not daemons, and a normal exit would wait for them."""
    if log is not None:
        log.flush()
    os._exit(code)


class _Db:
    """One small connection of the kit's own (registry writes, drain polls, watch), shared under a lock."""

    def __init__(self, url: str, executor_id: str) -> None:
        self.url = url
        self.name = f"afterlife_kit_{executor_id}"[:63]
        self._conn: Any = None
        self._lock = threading.Lock()

    def run(self, fn: Callable[[Any], Any], timeout_s: float = 5.0) -> Any:
        if not self._lock.acquire(timeout=timeout_s):
            raise TimeoutError("the kit's database connection is busy")
        try:
            if self._conn is None or self._conn.closed:
                self._conn = connect(self.url, self.name, options="-c statement_timeout=5000")
            try:
                return fn(self._conn)
            except Exception:
                try:
                    self._conn.close()
                except Exception:
                    pass
                self._conn = None
                raise
        finally:
            self._lock.release()

    def close(self) -> None:
        if self._lock.acquire(timeout=0.5):
            try:
                if self._conn is not None:
                    self._conn.close()
            finally:
                self._lock.release()


class ExecutorKit:
    """The attached kit. ``draining`` turns true at the first moment of a drain: the app should refuse new work."""

    def __init__(self, app: DbosApp, options: KitOptions, log: KitLog,
                 on_fenced: Optional[Callable[[int], None]] = None) -> None:
        self.app = app
        self.options = options
        self.executor_id = app.executor_id
        self.application_name = options.application_name
        self.application_version = app.application_version
        self.incarnation = secrets.token_hex(6)
        self.started_at = datetime.now(timezone.utc)
        self.state: KitState = "alive"
        self.log = log.child(executorId=self.executor_id, applicationName=self.application_name,
                             incarnation=self.incarnation)
        self.throttle = Throttle(self.log)
        self.db = _Db(options.database_url, self.executor_id)
        self.publisher: Optional[RestPublisher] = None
        self.publish_path: Optional[str] = None
        self._on_fenced = on_fenced
        self._closed = threading.Event()
        self._drain_hint = threading.Event()
        self._terminating = False
        self._handing_over = False
        self._fenced = False
        self._fast_path = threading.Event()
        self._second_signal: Optional[str] = None
        self._drain_started = False
        self.drained = threading.Event()
        self._lease_ms: Optional[int] = None
        self._facts_ready = False
        self._watched: Optional[bool] = None
        self.guarded_applications: List[str] = []
        self._watch_since = time.monotonic()
        self._warned_unwatched_at: Optional[float] = None
        self._unwatched_seen = False
        self._previous_handlers: Dict[int, Any] = {}
        self.redis: Any = None
        self.heartbeat: Optional[Heartbeat] = None
        if options.redis_url:
            self.redis = create_redis(options.redis_url, options.redis_tls_ca,
                                      max(0.1, options.heartbeat_interval_ms / 1000.0))
            self.heartbeat = Heartbeat(self.redis, application_name=self.application_name, executor_id=self.executor_id,
                                       prefix=options.key_prefix, ttl_ms=options.heartbeat_ttl_ms,
                                       interval_ms=options.heartbeat_interval_ms, value=self._value, log=self.log)
        self.poller: Optional[QueuePoller] = QueuePoller(app, self.log) if QueuePoller.available(app) else None
        self.liveness: Optional[LivenessLock] = None
        if options.liveness:
            self.liveness = LivenessLock(
                database_url=options.liveness_database_url or options.database_url,
                application_name=self.application_name, executor_id=self.executor_id,
                afterlife_schema=options.afterlife_schema, since=self.started_at, incarnation=self.incarnation,
                lease_ms=options.liveness_lease_ms, log=self.log, throttle=self.throttle, register=self._register,
                on_fenced=self._fence, on_requeued=self._claim_now if self.poller else None, on_lease=self._lease,
                on_drain_hint=self._drain_hint.set)

    # ------------------------------------------------------------------------------------------ properties

    @property
    def draining(self) -> bool:
        return self.state != "alive"

    @property
    def liveness_held(self) -> bool:
        return self.liveness.held if self.liveness else False

    @property
    def liveness_lease_ms(self) -> Optional[int]:
        return self.liveness.lease_ms if self.liveness else None

    @property
    def watched(self) -> Optional[bool]:
        """Whether a plane guards this application in this database (None until the database answered)."""
        return self._watched

    @property
    def heartbeats_lost(self) -> int:
        return self.heartbeat.lost_count if self.heartbeat else 0

    # ------------------------------------------------------------------------------------------ attach

    def check_database(self) -> None:
        table = f"{self.options.afterlife_schema}.drain_requests"
        try:
            found = self.db.run(lambda c: sql.find_table(c, table))
        except Exception as e:
            raise ConfigError([f"database_url: cannot query the database: {e}"]) from e
        if not found:
            raise ConfigError([
                f'afterlife\'s schema "{self.options.afterlife_schema}" is not in this database: run `afterlife-plane '
                "migrate` against it once (or set AFTERLIFE_SCHEMA / AFTERLIFE_DATABASE_URL to where it is)"])

    def start(self, url_from: str) -> None:
        o = self.options
        # Before the lock: the plane reads sessions that name no executor as a reason to judge nobody without the kit.
        name_dbos_sessions(self.app.dbos, self.executor_id, self.application_version, self.log)
        if o.publisher == "pubsub":
            self.publisher, self.publish_path = create_publisher(o.env, project=o.project, endpoint=o.pubsub_endpoint,
                                                                 log=self.log)
            threading.Thread(target=self.publisher.warm, args=(o.topic,), daemon=True).start()
        if o.handle_signals:
            self._install_signals()
        if not self.redis:
            self.log.warn("no Redis: no heartbeat; a crash of this executor is found only by the reaper without "
                          "heartbeat evidence")
        if not self.publisher:
            self.log.warn("no publisher: death notices are not sent; leftovers wait for the reaper")
        if not self.liveness:
            self.log.warn("liveness lock off: a crash is detected by the heartbeat alone (a TTL later)")
            self._guarded("register executor", self._register)
        if self.heartbeat:
            self.heartbeat.beat()
        if self.liveness:
            try:
                self.liveness.start(3.0)
            except NotOneSessionError as e:
                self._refused("not-one-session", str(e))
                raise
        if self.heartbeat:
            self.heartbeat.start()
        self._poll_once(first=True)
        threading.Thread(target=self._poll_loop, name="afterlife-poll", daemon=True).start()
        self._facts_ready = True
        self._record_facts()
        if self.poller is None:
            self.log.notice("this DBOS release's queue claim is not where the kit looks: recoveries will not ask this "
                            "executor to claim recovered work at once; run a tested DBOS for Python",
                            event="requeued_poll_unavailable")
        self.log.info("executor kit attached", applicationVersion=self.application_version,
                      heartbeatIntervalMs=self.heartbeat.interval_ms if self.heartbeat else None,
                      liveness=("held" if self.liveness_held else "pending") if self.liveness else "off",
                      livenessLeaseMs=self.liveness_lease_ms, watched=self._watched,
                      guardedApplications=self.guarded_applications,
                      deathNotices=self.publish_path or "off", databaseUrlFrom=url_from,
                      dbosVersion=self.app.dbos_version, kitVersion=__version__, event="kit_attached")

    def _install_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            self.log.warn("attach_executor was not called on the main thread: no SIGTERM handler is installed, so a "
                          "SIGTERM is a crash (install one that calls kit.terminate())", event="kit_no_signal_handler")
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            prev = signal.getsignal(sig)
            if prev not in (signal.SIG_DFL, signal.SIG_IGN, signal.default_int_handler, None):
                self.log.notice(f"replacing the app's own {signal.Signals(sig).name} handler: the kit drains and exits "
                                "inside the grace itself", event="kit_signal_handler_replaced")
            self._previous_handlers[sig] = prev
            signal.signal(sig, self._on_signal)

    # ------------------------------------------------------------------------------------------ registry

    def _register(self) -> None:
        ours, superseded = self.db.run(lambda c: sql.register_alive(
            c, self.options.afterlife_schema, application_name=self.application_name, executor_id=self.executor_id,
            application_version=self.application_version, started_at=self.started_at,
            heartbeats=self.heartbeat is not None, liveness=self.liveness is not None, incarnation=self.incarnation))
        if not ours:
            self.log.warn("the registry names a later-started process with this executor ID: this one is superseded",
                          event="executor_superseded")
        if superseded:
            self.log.warn("another process with this executor ID was live: it is superseded and its kit exits; what it "
                          "claimed after this one's launch stays PENDING under this ID until the reaper or a restart "
                          "recovers it", superseded=superseded, event="executor_superseded_other")

    def registry(self, state: str, reason: Optional[str] = None, timeout_s: float = 5.0) -> None:
        def write(c: Any) -> None:
            sql.set_state(c, self.options.afterlife_schema, application_name=self.application_name,
                          executor_id=self.executor_id, state=state, reason=reason,
                          detected_by=self.executor_id if reason else None,
                          application_version=self.application_version, incarnation=self.incarnation)

        self._guarded(f"registry → {state}", lambda: self.db.run(write, timeout_s))

    def _guarded(self, what: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception as e:  # noqa: BLE001
            self.throttle.report(what, e)
            return None

    def _lease(self, server_lease_ms: int) -> None:
        self._lease_ms = server_lease_ms
        if self._facts_ready:
            threading.Thread(target=self._record_facts, daemon=True).start()

    def _record_facts(self) -> None:
        facts = {
            "incarnation": self.incarnation,
            "kitVersion": __version__,
            "dbosVersion": self.app.dbos_version,
            # Which DBOS: the plane's version check reads dbosVersion against this SDK's supported range.
            "dbosSdk": "python",
            "livenessLeaseMs": self._lease_ms,
            "pollsOnRequest": self.poller is not None,
            # DBOS's notification listener keeps the name DBOS gave it at launch: the plane counts it as this kit's.
            "dbosSessionPids": unnamed_session_pids(self.app.dbos),
        }
        try:
            self.db.run(lambda c: sql.record_kit_facts(c, self.options.afterlife_schema,
                                                       application_name=self.application_name,
                                                       executor_id=self.executor_id, facts=facts))
        except Exception as e:  # noqa: BLE001
            if getattr(e, "sqlstate", None) == "42703":
                self.log.warn("afterlife's schema predates kit facts: this kit's versions and lease are not recorded, "
                              "so doctor cannot check them; run `afterlife-plane migrate`", event="kit_facts_unrecorded")
            else:
                self.log.debug("recording the kit facts failed; the next reconnect retries", err=e)

    def _refused(self, reason: str, detail: str) -> None:
        try:
            self.db.run(lambda c: sql.record_kit_refusal(
                c, self.options.afterlife_schema, application_name=self.application_name,
                executor_id=self.executor_id, incarnation=self.incarnation, reason=reason,
                detail=" ".join(detail.split())), 1.5)
        except Exception as e:  # noqa: BLE001
            self.log.debug("recording the refusal failed", err=e)

    def _value(self) -> Dict[str, Any]:
        running = self.app.running_count()
        return {
            "executorId": self.executor_id,
            "applicationName": self.application_name,
            "applicationVersion": self.application_version,
            "state": "drained" if self.state == "drained" else "alive" if self.state == "alive" else "draining",
            "startedAt": _iso(self.started_at),
            "beatAt": _iso(datetime.now(timezone.utc)),
            "inFlight": running if running is not None else 0,
            "beatEveryMs": self.options.heartbeat_interval_ms,
            "ttlMs": self.options.heartbeat_ttl_ms,
        }

    def beat(self) -> None:
        if self.heartbeat:
            self.heartbeat.beat()

    # ------------------------------------------------------------------------------------------ polls

    def _poll_loop(self) -> None:
        every = DRAIN_BACKSTOP_POLL_S if self.liveness else DRAIN_POLL_S
        next_poll, next_watch = time.monotonic() + every, time.monotonic() + WATCH_CHECK_EVERY_S
        while True:
            now = time.monotonic()
            if now >= next_watch:
                next_watch = now + WATCH_CHECK_EVERY_S
                self._watch()
            if now >= next_poll:
                next_poll = now + every
                self._poll_once(first=False)
            if self._drain_hint.wait(max(0.0, min(next_poll, next_watch) - time.monotonic())):
                self._drain_hint.clear()
                next_poll = time.monotonic()
            if self._closed.is_set():
                return

    def _poll_once(self, first: bool) -> None:
        if first:
            self._watch()
        if self.state != "alive" or self._closed.is_set():
            return
        try:
            req = self.db.run(lambda c: sql.find_drain_request(
                c, self.options.afterlife_schema, application_name=self.application_name,
                executor_id=self.executor_id, application_version=self.application_version))
            self.throttle.ok("poll drain requests")
        except Exception as e:  # noqa: BLE001
            self.throttle.report("poll drain requests", e)
            return
        if req and self.state == "alive" and not self._closed.is_set():
            self.log.notice("drain requested", requestId=req[0], budgetMs=req[1])
            self.drain(req[1])

    def _watch(self) -> None:
        try:
            ticks = self.db.run(lambda c: sql.plane_ticks(c, self.options.afterlife_schema))
            self.throttle.ok("watch check")
        except Exception as e:  # noqa: BLE001
            self.throttle.report("watch check", e, what="whether a plane guards this application")
            return
        guarded = [app for app, since in ticks if since <= GUARD_TICK_WITHIN_MS]
        app = self.application_name
        watched = app in guarded
        self._watched, self.guarded_applications = watched, guarded
        if watched:
            if self._unwatched_seen:
                self.log.info(f'a plane now guards application "{app}" in this database', event="kit_watched")
            self._unwatched_seen = False
            self._warned_unwatched_at = None
            return
        self._unwatched_seen = True
        now = time.monotonic()
        if now - self._watch_since < WATCH_GRACE_S:
            return
        if self._warned_unwatched_at is not None and now - self._warned_unwatched_at < UNWATCHED_WARN_EVERY_S:
            return
        self._warned_unwatched_at = now
        if guarded:
            planes = "the plane(s) in this database guard " + ", ".join(f'"{g}"' for g in guarded)
        elif ticks:
            planes = (f'no plane ticks in this database (the last one guarded "{ticks[0][0]}", '
                      f"{round(ticks[0][1] / 1000)} s ago)")
        else:
            planes = "no plane has ever ticked in this database"
        fix = (f"set DBOS_APPLICATION_NAME={app} (or DBOS_APP_NAME) on the plane for this database, so it guards the "
               "name this app registers under (DBOS's application name)")
        if len(guarded) == 1:
            fix += f'; or name this app "{guarded[0]}" in its DBOS configuration if that plane is meant for it'
        self.log.warn(f'no plane guards application "{app}": {planes}. Deaths of this process are NOT recovered. '
                      f"Fix: {fix}", event="kit_unwatched", guardedApplications=guarded, fix=fix,
                      repeatsEveryMs=int(UNWATCHED_WARN_EVERY_S * 1000))

    def _claim_now(self, notice: Mapping[str, Any]) -> None:
        """A recovery asks this executor to claim what it re-enqueued now, not at DBOS's next poll."""
        if self.state != "alive" or self._fenced or self._closed.is_set() or self._handing_over or not self.poller:
            return
        v = notice.get("applicationVersion")
        if v is not None and v != self.application_version:
            return
        polled = self.poller.poll(notice["queues"])
        self.log.debug("claiming re-enqueued work now", queues=polled, asked=notice["queues"], event="requeued_poll")

    # ------------------------------------------------------------------------------------------ fence

    def _fence(self, fence: Mapping[str, Any]) -> None:
        if self._fenced or self._handing_over or self._closed.is_set():
            return
        self._fenced = True
        self.log.error(f"{fence_message(fence, self.executor_id, self.incarnation)}: exiting now (code "
                       f"{FENCED_EXIT_CODE}), before this process runs another step", verdict=fence.get("verdict"),
                       reason=fence.get("reason"), detectedBy=fence.get("detectedBy"), at=fence.get("at"),
                       exitCode=FENCED_EXIT_CODE, event="executor_fenced")
        if self._on_fenced is not None:
            self._on_fenced(FENCED_EXIT_CODE)
        else:
            _exit(FENCED_EXIT_CODE, self.log)

    # ------------------------------------------------------------------------------------------ drain

    def _on_signal(self, signum: int, frame: Optional[FrameType]) -> None:
        self.terminate(signal.Signals(signum).name)

    def terminate(self, sig: str = "SIGTERM") -> None:
        """SIGTERM's path: intake stops now, in-flight work gets the grace, the rest is handed over, then exit.

        Returns at once (a signal handler must); the drain runs on its own thread and ends the process. A
        second call skips the wait.
        """
        # Nothing here writes to the log: a signal handler that writes to a stream the interrupted code was
        # writing to raises a reentrant-call error. The drain thread says what happens.
        if self._terminating:
            self._second_signal = sig
            self._fast_path.set()
            return
        self._terminating = True
        was_drained = self.state == "drained"
        self.state = "exiting"
        received = time.monotonic()
        o = self.options
        grace = o.shutdown_grace_ms
        margin = min(o.shutdown_margin_ms, grace // 2)
        budget_ms = grace - margin
        wait_ms = max(0, budget_ms - min(o.handover_reserve_ms, budget_ms // 2))

        def hard() -> None:
            self.log.error("shutdown grace nearly over: exiting now", event="shutdown_forced")
            _exit(1, self.log)

        timer = threading.Timer(max(0, grace - HARD_EXIT_BEFORE_GRACE_MS) / 1000.0, hard)
        timer.daemon = True
        timer.start()
        # Before anything can block: no new work is claimed from here on.
        if not was_drained:
            self.app.stop_intake()

        def run() -> None:
            self.log.notice(f"{sig}: draining", budgetMs=budget_ms, waitMs=wait_ms, event="executor_draining")
            # The beat keeps running (state draining) until close: a key that lapsed mid-drain would let the
            # reaper's heartbeat rule declare this working executor dead and run its steps a second time.
            announce = threading.Thread(target=lambda: (self.beat(), self.registry("draining", "sigterm", 2.0)),
                                        daemon=True)
            announce.start()
            if not was_drained:
                idle = self.app.wait_idle(wait_ms / 1000.0, self._fast_path)
                if self._second_signal:
                    self.log.warn(f"second {self._second_signal}: fast path")
                self.log.info("in-flight wait over", outcome="stopped" if idle else
                              ("fast" if self._fast_path.is_set() else "timeout"),
                              elapsedMs=int((time.monotonic() - received) * 1000))
            deadline = received + budget_ms / 1000.0

            def left(cap_s: float) -> float:
                return max(0.05, min(cap_s, deadline - time.monotonic()))

            announce.join(left(STEP_TIMEOUT_S))
            self.drained.set()
            self.hand_over("sigterm", left)
            self.close(left)
            timer.cancel()
            self.log.notice("exiting", elapsedMs=int((time.monotonic() - received) * 1000), event="executor_exit")
            _exit(0, self.log)

        threading.Thread(target=run, name="afterlife-sigterm", daemon=True).start()

    def hand_over(self, reason: Literal["sigterm", "drained"],
                  left: Callable[[float], float] = lambda c: c) -> Optional[int]:
        """The death notice for whatever of this executor is still PENDING (recovery runs it elsewhere now)."""
        self._handing_over = True
        try:
            pending: Optional[List[Any]] = self.db.run(lambda c: sql.pending_by_version(
                c, self.options.dbos_schema, application_name=self.application_name, executor_id=self.executor_id),
                left(STEP_TIMEOUT_S))
        except Exception as e:  # noqa: BLE001
            self.log.warn("could not count PENDING workflows; publishing the death notice anyway", err=e)
            pending = None
        count = sum(n for _, n in pending) if pending is not None else None
        if count == 0:
            self.log.info("nothing left PENDING: no death notice needed")
            if reason == "sigterm":
                self.registry("dead", "sigterm", left(STEP_TIMEOUT_S))
            return 0
        versions = sorted({v for v, _ in (pending or []) if v is not None})
        if not self.publisher:
            self.log.warn("workflows left PENDING and no publisher: the reaper will recover them", pending=count)
            return count
        try:
            notice: Dict[str, Any] = {
                "type": "executor.dead",
                "version": 1,
                "executorId": self.executor_id,
                "applicationName": self.application_name,
                "reason": reason,
                "detectedAt": _iso(datetime.now(timezone.utc)),
                "detectedBy": f"afterlife-executor:{self.executor_id}",
                "incarnation": self.incarnation,
            }
            if versions:
                notice["applicationVersions"] = versions
            mid = publish_death_notice(self.publisher, self.options.topic or EXECUTOR_DEATH_TOPIC, notice,
                                       left(self.options.publish_timeout_ms / 1000.0))
            self.log.notice("death notice published", messageId=mid, pending=count, reason=reason,
                            event="death_notice_published")
        except Exception as e:  # noqa: BLE001
            self.log.error("death notice not published; the reaper will find this executor once it exits", err=e,
                           pending=count, event="death_notice_failed")
        return count

    def drain(self, budget_ms: int) -> None:
        """A planned drain (a drain request, or called by the app): on its own thread, once."""
        if self._drain_started or self._terminating:
            return
        self._drain_started = True
        threading.Thread(target=self._planned_drain, args=(budget_ms,), name="afterlife-drain", daemon=True).start()

    def _planned_drain(self, budget_ms: int) -> None:
        started = time.monotonic()
        self.state = "draining"
        self.app.stop_intake()
        self.beat()
        self.registry("draining", "drain-request")
        self.app.wait_idle(budget_ms / 1000.0, self._fast_path)
        if self._terminating:
            return  # a SIGTERM took over and finishes the job
        pending = self.hand_over("drained")
        if self._terminating:
            return
        running = self.app.running_count() or 0
        leftovers = pending != 0 or running > 0
        self.state = "drained"
        self.drained.set()
        if leftovers:
            # The notice is out, so recovery may already run this work elsewhere: this copy must stop now.
            self.log.notice("work outlived the drain budget: exiting, so that it stops here while recovery runs it "
                            "elsewhere", pending=pending if pending is not None else "unknown", running=running,
                            event="executor_drain_exit")
            self.registry("drained", "drain-request", 0.5)
            self.close()
            _exit(0, self.log)
        self.registry("drained", "drain-request")
        self.beat()
        self.log.notice("drained", elapsedMs=int((time.monotonic() - started) * 1000),
                        pending=pending if pending is not None else "unknown", running=running, event="executor_drained")
        if self.options.exit_after_planned_drain and not self._terminating:
            self.close()
            _exit(0, self.log)

    def close(self, left: Callable[[float], float] = lambda c: c) -> None:
        """Stops beating (deleting the key), releases the liveness lock, closes the kit's connections."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._drain_hint.set()
        for sig, prev in self._previous_handlers.items():
            try:
                if threading.current_thread() is threading.main_thread():
                    signal.signal(sig, prev)
            except Exception:
                pass
        stoppers = []
        if self.heartbeat:
            stoppers.append(threading.Thread(target=self.heartbeat.stop, daemon=True))
        if self.liveness:
            stoppers.append(threading.Thread(target=self.liveness.close, daemon=True))
        for t in stoppers:
            t.start()
        for t in stoppers:
            t.join(left(0.5))
        self.db.close()
        if self.redis is not None:
            try:
                self.redis.close()
            except Exception:
                pass


def fence_message(f: Mapping[str, Any], executor_id: str, incarnation: str) -> str:
    me = f"this process (incarnation {incarnation} of executor {executor_id})"
    by = f" by {f['detectedBy']}" if f.get("detectedBy") else ""
    at = f" at {f['at']}" if f.get("at") else ""
    verdict = f.get("verdict")
    if verdict == "superseded":
        return (f"a newer process started with this executor ID (incarnation {f.get('incarnation') or '?'}{at}); "
                f"DBOS's launch recovery hands it this executor's work, so {me} must stop")
    if verdict == "moved":
        return (f"a recovery{by}{at} moved {f.get('moved') or 'some'} of this executor's workflows to other executors "
                f"(reason: {f.get('reason') or 'unknown'}), so {me} must not run them too")
    return f"{me} was declared dead{by}{at} (reason: {f.get('reason') or 'unknown'}); its PENDING workflows are " \
           "handed to other executors"


def _iso(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def attach_executor(
    *,
    application_name: Optional[str] = None,
    database_url: Optional[str] = None,
    redis_url: Optional[str] = None,
    env: Optional[Mapping[str, str]] = None,
    fatal: Optional[bool] = None,
    handle_signals: bool = True,
    on_fenced: Optional[Callable[[int], None]] = None,
    logger: Optional[Any] = None,
    **options: Any,
) -> ExecutorKit:
    """Attaches the kit to the DBOS this process launched; call it once, right after ``DBOS.launch()``.

    With no arguments it reads what DBOS was configured with (system database URL and schema, application
    name, executor ID, version) and the same environment variables as the TypeScript kit (REDIS_URL,
    HEARTBEAT_*, AFTERLIFE_*, PUBSUB_EMULATOR_HOST / Cloud Run's metadata server, ...); explicit arguments
    win. A failed attach logs one ERROR and exits the process with code 78 (``fatal=False`` or
    AFTERLIFE_ATTACH_FATAL=false: it raises instead), so an app never runs on without the kit unnoticed.
    """
    source: Mapping[str, str] = env if env is not None else dict(os.environ)
    if fatal is None:
        fatal = source.get("AFTERLIFE_ATTACH_FATAL") != "false"
    log = KitLog(logger)
    try:
        return _attach(source, log, application_name=application_name, database_url=database_url,
                       redis_url=redis_url, handle_signals=handle_signals, on_fenced=on_fenced, fatal=fatal,
                       options=options)
    except Exception as e:
        if not fatal:
            raise
        log.error("executor kit NOT attached: exiting, so the app never runs on without crash recovery unnoticed "
                  "(fatal=False to handle it instead)", err=e, exitCode=ATTACH_FAILED_EXIT_CODE,
                  event="kit_attach_failed")
        _exit(ATTACH_FAILED_EXIT_CODE, log)
        raise


def _attach(env: Mapping[str, str], log: KitLog, *, application_name: Optional[str], database_url: Optional[str],
            redis_url: Optional[str], handle_signals: bool, on_fenced: Optional[Callable[[int], None]],
            fatal: bool, options: Dict[str, Any]) -> ExecutorKit:
    app = launched_dbos()
    explicit: Dict[str, Any] = {**options, "application_name": application_name, "database_url": database_url,
                                "redis_url": redis_url, "handle_signals": handle_signals, "fatal": fatal}
    resolved, url_from = resolve_options(dbos_url=app.system_database_url, dbos_schema=app.system_schema,
                                         dbos_app_name=app.application_name, explicit=explicit, env=env)
    allow_local = resolved.allow_local_executor_id or read_variables(env).get("AFTERLIFE_ALLOW_LOCAL_EXECUTOR_ID") == "true"
    if not app.executor_id or (app.executor_id == "local" and not allow_local):
        raise ExecutorIdError([
            f'executor ID "{app.executor_id}" is DBOS\'s shared default: set the config\'s executor_id or DBOS__VMID to '
            "a unique value per process (on Cloud Run: the revision and a hash of the instance ID), or pass "
            "allow_local_executor_id=True for a single-process dev setup"])
    kit = ExecutorKit(app, resolved, log, on_fenced)
    try:
        # Non-fatal kits start anyway: database trouble is then logged once a minute and heals by itself.
        if fatal:
            kit.check_database()
        kit.start(url_from)
    except Exception:
        kit.close()
        raise
    return kit
