"""The liveness session's cadence and hints, on a real Postgres with afterlife's tables.

The lease is renewed by empty queries with the fence question only every ``FENCE_EVERY``-th renewal (the
contract's ``LIVENESS_FENCE_EVERY_MS / LIVENESS_RENEW_EVERY_MS``); a registration that supersedes the live
incarnation, and a drain request for the application, are heard on the session the moment they are written.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, cast

import psycopg
import pytest

from afterlife_executor import liveness, sql
from afterlife_executor.contract import LIVENESS_FENCE_EVERY_MS, LIVENESS_RENEW_EVERY_MS, drain_channel
from afterlife_executor.log import KitLog, Throttle

from conftest import database_url

MIGRATIONS = Path(__file__).resolve().parents[3] / "shared" / "db" / "migrations"
APP = "app-py-cadence"


def _url(name: str) -> str:
    base = database_url()
    return base[: base.rindex("/") + 1] + name


@pytest.fixture(scope="module")
def db() -> Iterator[str]:
    name = f"afterlife_pyliveness_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(database_url(), autocommit=True) as c:
        c.execute(cast(Any, f'CREATE DATABASE "{name}"'))
    try:
        with psycopg.connect(_url(name), autocommit=True) as c:
            c.execute('CREATE SCHEMA IF NOT EXISTS "afterlife"')
            for f in sorted(MIGRATIONS.glob("[0-9][0-9][0-9][0-9]_*.sql")):
                c.execute(cast(Any, f.read_text().replace(":SCHEMA:", '"afterlife"')))
        yield _url(name)
    finally:
        with psycopg.connect(database_url(), autocommit=True) as c:
            c.execute(cast(Any, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def _register(url: str, executor_id: str, incarnation: str) -> None:
    with psycopg.connect(url, autocommit=True) as c:
        sql.register_alive(c, "afterlife", application_name=APP, executor_id=executor_id, application_version="v1",
                           started_at=datetime.now(timezone.utc), heartbeats=True, liveness=True,
                           incarnation=incarnation)


def _lock(url: str, executor_id: str, incarnation: str, fenced: List[Dict[str, Any]],
          on_drain_hint: Optional[Callable[[], None]] = None) -> liveness.LivenessLock:
    log = KitLog()
    return liveness.LivenessLock(
        database_url=url, application_name=APP, executor_id=executor_id, afterlife_schema="afterlife",
        since=datetime.now(timezone.utc), incarnation=incarnation, lease_ms=8_000, log=log, throttle=Throttle(log),
        register=lambda: _register(url, executor_id, incarnation), on_fenced=fenced.append, on_requeued=None,
        on_lease=lambda _ms: None, on_drain_hint=on_drain_hint)


def _until(what: str, ok: Callable[[], bool], timeout_s: float = 5.0) -> float:
    t0 = time.monotonic()
    while not ok():
        if time.monotonic() - t0 > timeout_s:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)
    return time.monotonic() - t0


def test_the_cadence_is_the_contracts() -> None:
    assert liveness.RENEW_EVERY_S == LIVENESS_RENEW_EVERY_MS / 1000
    assert liveness.FENCE_EVERY == LIVENESS_FENCE_EVERY_MS // LIVENESS_RENEW_EVERY_MS
    assert liveness.FENCE_EVERY >= 2


def test_renews_with_empty_queries_and_asks_the_fence_question_every_few(db: str,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(liveness, "RENEW_EVERY_S", 0.1)
    fenced: List[Dict[str, Any]] = []
    lock = _lock(db, "exec-cadence", "inc-cadence", fenced)
    lock.start()
    try:
        assert lock.held
        # Each word the session says is one query_start in pg_stat_activity; its text says which word it was.
        seen: Dict[str, str] = {}
        with psycopg.connect(db, autocommit=True) as c:
            deadline = time.monotonic() + 3.0
            while time.monotonic() < deadline:
                for at, query in c.execute("SELECT query_start::text, query FROM pg_stat_activity WHERE application_name "
                                           "LIKE 'afterlife_live_exec-cadence@%' AND datname = current_database()"):
                    seen[at] = query
                time.sleep(0.01)
        renewals = sum(1 for q in seen.values() if q == "")
        fences = sum(1 for q in seen.values() if "'verdict'" in q)
        print(f"[liveness:cadence] in 3 s at a 100 ms cadence: {renewals} empty renewals, {fences} fence questions seen")
        assert fences > 0
        # Sampling misses some words; the ratio, not the count, is the point.
        assert renewals >= (liveness.FENCE_EVERY - 1) * fences * 0.6
        assert lock.held and not fenced
    finally:
        lock.close()


def test_a_registration_that_supersedes_it_is_heard_at_once(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Nothing periodic within the test: only the hint can make it ask.
    monkeypatch.setattr(liveness, "RENEW_EVERY_S", 60.0)
    fenced: List[Dict[str, Any]] = []
    lock = _lock(db, "exec-superseded", "inc-old", fenced)
    lock.start()
    try:
        assert lock.held
        t0 = time.monotonic()
        _register(db, "exec-superseded", "inc-new")
        _until("the old incarnation fenced", lambda: bool(fenced))
        print(f"[liveness:cadence] superseded incarnation fenced {(time.monotonic() - t0) * 1000:.0f} ms after the "
              "new registration")
        assert fenced[0]["verdict"] == "superseded"
    finally:
        lock.close()


def test_a_drain_hint_for_its_application_is_heard_on_the_session(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(liveness, "RENEW_EVERY_S", 60.0)
    hints: List[float] = []
    heard = threading.Event()
    lock = _lock(db, "exec-drain", "inc-drain", [], on_drain_hint=lambda: (hints.append(time.monotonic()), heard.set()))
    lock.start()
    try:
        with psycopg.connect(db, autocommit=True) as c:
            # Another application's request is not this kit's business.
            c.execute("SELECT pg_notify(%s, %s)", (drain_channel("afterlife"), json.dumps({"applicationName": "other"})))
            t0 = time.monotonic()
            c.execute("SELECT pg_notify(%s, %s)", (drain_channel("afterlife"), json.dumps({"applicationName": APP})))
        assert heard.wait(5.0)
        print(f"[liveness:cadence] drain hint heard {(hints[0] - t0) * 1000:.0f} ms after the NOTIFY")
        # Notifications arrive in the order they were sent: had the other application's been taken, it would be here.
        assert len(hints) == 1
    finally:
        lock.close()
