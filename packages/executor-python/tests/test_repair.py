"""get_result_with_repair against real Postgres and a real DBOS Python app: a workflow diverges the way a
deploy makes it diverge (recorded under the old code, replayed under the new), and the helper forks it
once, under the deterministic ID, from the divergent step, ledgered in afterlife's schema, within the
lineage's budget, and returns the repaired result."""

from __future__ import annotations

import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, cast
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from afterlife_executor.repair import (
    ForkBudgetExhaustedError,
    ForkInfo,
    divergence_of,
    fork_id,
    get_result_with_auto_fork,
    get_result_with_repair,
)

# The admin database of the test server: the Python suite's variable, else the TypeScript harness's.
ADMIN_URL = (
    os.environ.get("AFTERLIFE_TEST_DATABASE_URL")
    or os.environ.get("TEST_DATABASE_URL")
    or "postgresql://postgres@127.0.0.1:5432/postgres"
)
MIGRATIONS = Path(__file__).resolve().parents[3] / "shared" / "db" / "migrations"
APP = "pyextras-repair"
VERSION = "pyx-v1"
BOUND_SEC = 30.0


def wait_until(cond: Callable[[], bool], what: str, bound: float = BOUND_SEC) -> None:
    deadline = time.monotonic() + bound
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {bound} s waiting for {what}")
        time.sleep(0.05)


class App:
    """A DBOS Python app whose agent workflow's second step changed between two deploys."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.mode = "old"
        self.plan_runs = 0
        self.hold = threading.Event()
        self.released: Dict[str, threading.Event] = {}
        self.agent: Any = None
        self.failing: Any = None
        self.parent: Any = None

    def sql(self, query: str, *params: Any) -> List[Any]:
        with psycopg.connect(self.url, autocommit=True) as c:
            cur = c.execute(cast(Any, query), params)
            return cur.fetchall() if cur.description else []


def database_url(name: str) -> str:
    u = urlsplit(ADMIN_URL)
    return urlunsplit(u._replace(scheme="postgresql", path=f"/{name}"))


def _launch(a: App) -> None:
    from dbos import DBOS

    DBOS(
        config={
            "name": APP,
            "system_database_url": a.url,
            # @DBOS.transaction needs an application database (see the limiter's test below).
            "application_database_url": a.url + "_app",
            "application_version": VERSION,
            "run_admin_server": False,
            "log_level": "WARNING",
        }
    )

    @DBOS.step()
    def plan_step(task: str) -> str:
        a.plan_runs += 1
        return f"plan({task})"

    @DBOS.step()
    def search_step(plan: str) -> str:
        return f"search({plan})"

    @DBOS.step()
    def browse_step(plan: str) -> str:
        return f"browse({plan})"

    @DBOS.step()
    def llm_step(found: str) -> str:
        # The long agent call: held until the test lets it go, so the test can cancel mid-call.
        a.hold.wait(BOUND_SEC)
        return f"answer({found})"

    @DBOS.workflow()
    def agent(task: str) -> str:
        try:
            plan = plan_step(task)
            found = search_step(plan) if a.mode == "old" else browse_step(plan)
            return llm_step(found)
        finally:
            a.released.setdefault(DBOS.workflow_id or "", threading.Event()).set()

    @DBOS.workflow()
    def failing(task: str) -> str:
        raise ValueError(f"ordinary failure of {task}")

    @DBOS.workflow()
    def parent(task: str) -> str:
        try:
            return agent(task)
        finally:
            a.released.setdefault(DBOS.workflow_id or "", threading.Event()).set()

    a.agent, a.failing, a.parent = agent, failing, parent
    DBOS.launch()
    # afterlife's own tables in the same database, as the plane's migrator applies them.
    with psycopg.connect(a.url, autocommit=True) as c:
        c.execute('CREATE SCHEMA IF NOT EXISTS "afterlife"')
        for f in sorted(MIGRATIONS.glob("[0-9][0-9][0-9][0-9]_*.sql")):
            c.execute(cast(Any, f.read_text().replace(":SCHEMA:", '"afterlife"')))


@pytest.fixture(scope="module")
def app() -> Iterator[App]:
    from dbos import DBOS

    name = f"afterlife_pyextras_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as c:
        c.execute(cast(Any, f'CREATE DATABASE "{name}"'))
        c.execute(cast(Any, f'CREATE DATABASE "{name}_app"'))
    a = App(database_url(name))
    try:
        _launch(a)
        yield a
    finally:
        DBOS.destroy(destroy_registry=True)
        with psycopg.connect(ADMIN_URL, autocommit=True) as c:
            c.execute(cast(Any, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            c.execute(cast(Any, f'DROP DATABASE IF EXISTS "{name}_app" WITH (FORCE)'))


def diverge(app: App, start: Callable[[], str]) -> str:
    """Runs a workflow under the old code until its agent call, cancels it, then resumes it under the new
    code: the replay asks for browse_step where search_step was recorded, and DBOS ends it ERROR."""
    from dbos import DBOS

    app.mode = "old"
    app.hold.clear()
    wid = start()
    top = wid
    wait_until(
        lambda: any(s["function_name"].endswith("search_step") for s in _steps_of_any(app, top)),
        "the old code's search step",
    )
    DBOS.cancel_workflow(top)
    for w in _workflows_under(app, top):
        DBOS.cancel_workflow(w)
    app.mode = "new"
    app.hold.set()
    wait_until(lambda: all(app.released.get(w, threading.Event()).is_set() for w in _agents_under(app, top)), "the old run to end")
    app.hold.clear()
    for w in _workflows_under(app, top)[::-1]:
        DBOS.resume_workflow(w)
    DBOS.resume_workflow(top)
    wait_until(lambda: _status(app, top) == "ERROR", f"{top} to end ERROR")
    return top


def _status(app: App, wid: str) -> Optional[str]:
    rows = app.sql("SELECT status FROM dbos.workflow_status WHERE workflow_uuid = %s", wid)
    return rows[0][0] if rows else None


def _workflows_under(app: App, wid: str) -> List[str]:
    rows = app.sql("SELECT workflow_uuid FROM dbos.workflow_status WHERE parent_workflow_id = %s", wid)
    return [r[0] for r in rows]


def _agents_under(app: App, wid: str) -> List[str]:
    return [wid, *_workflows_under(app, wid)]


def _steps_of_any(app: App, wid: str) -> List[Any]:
    from dbos import DBOS

    out: List[Any] = []
    for w in _agents_under(app, wid):
        out.extend(DBOS.list_workflow_steps(w))
    return out


def _start_agent(app: App, task: str) -> Callable[[], str]:
    def go() -> str:
        from dbos import DBOS, SetWorkflowID

        wid = f"agent-{task}-{uuid.uuid4().hex[:8]}"
        with SetWorkflowID(wid):
            DBOS.start_workflow(app.agent, task)
        return wid

    return go


def test_a_diverged_workflow_is_forked_once_from_its_divergent_step_and_its_result_returned(app: App) -> None:
    wid = diverge(app, _start_agent(app, "t1"))
    from dbos import DBOS

    status = DBOS.get_workflow_status(wid)
    assert status is not None
    d = divergence_of(status.error)
    assert d is not None and d.workflow_id == wid
    step = d.step_id
    runs_before = app.plan_runs
    forks: List[ForkInfo] = []
    app.hold.set()
    result = get_result_with_repair(wid, on_fork=forks.append, poll_sec=0.2)
    assert result == "answer(browse(plan(t1)))"
    new_id = fork_id(wid, 1)
    assert [(f.from_workflow_id, f.to_workflow_id, f.n, f.start_step) for f in forks] == [(wid, new_id, 1, step)]
    # The steps before the divergent one were copied, not run again.
    assert app.plan_runs == runs_before
    row = app.sql(
        "SELECT forked_from, application_version, status FROM dbos.workflow_status WHERE workflow_uuid = %s", new_id
    )
    assert row == [(wid, VERSION, "SUCCESS")]
    assert app.sql("SELECT was_forked_from FROM dbos.workflow_status WHERE workflow_uuid = %s", wid) == [(True,)]
    ledger = app.sql(
        "SELECT root_workflow_id, n, application_name, source_workflow_id, from_step, new_workflow_id,"
        " application_version, reason, diverged_workflow_id, child_fork_id FROM afterlife.forks"
        " WHERE root_workflow_id = %s",
        wid,
    )
    assert ledger == [(wid, 1, APP, wid, step, new_id, VERSION, "diverged", wid, None)]

    # Asked again: the same fork is found (its primary key), not a second lineage.
    again: List[ForkInfo] = []
    assert get_result_with_auto_fork(wid, on_fork=again.append) == "answer(browse(plan(t1)))"
    assert [f.to_workflow_id for f in again] == [new_id]
    assert app.sql("SELECT count(*) FROM dbos.workflow_status WHERE forked_from = %s", wid) == [(1,)]
    assert app.sql("SELECT count(*) FROM afterlife.forks WHERE root_workflow_id = %s", wid) == [(1,)]


def test_a_parent_whose_child_diverged_is_forked_from_the_step_that_started_the_child(app: App) -> None:
    def start_parent() -> str:
        from dbos import DBOS, SetWorkflowID

        wid = f"parent-{uuid.uuid4().hex[:8]}"
        with SetWorkflowID(wid):
            DBOS.start_workflow(app.parent, "t2")
        return wid

    wid = diverge(app, start_parent)
    from dbos import DBOS

    status = DBOS.get_workflow_status(wid)
    assert status is not None
    d = divergence_of(status.error)
    assert d is not None and d.workflow_id != wid, "the parent's error names the child"
    start_row = [
        s["function_id"]
        for s in DBOS.list_workflow_steps(wid)
        if s["child_workflow_id"] == d.workflow_id and not s["function_name"].startswith("DBOS.")
    ]
    app.hold.set()
    forks: List[ForkInfo] = []
    assert get_result_with_repair(wid, on_fork=forks.append, poll_sec=0.2) == "answer(browse(plan(t2)))"
    assert [(f.to_workflow_id, f.start_step) for f in forks] == [(fork_id(wid, 1), start_row[0])]
    assert app.sql("SELECT reason, diverged_workflow_id FROM afterlife.forks WHERE root_workflow_id = %s", wid) == [
        ("child-diverged", d.workflow_id)
    ]


def test_an_ordinary_error_is_raised_and_never_forked(app: App) -> None:
    from dbos import DBOS, SetWorkflowID

    wid = f"failing-{uuid.uuid4().hex[:8]}"
    with SetWorkflowID(wid):
        DBOS.start_workflow(app.failing, "t3")
    with pytest.raises(ValueError, match="ordinary failure of t3"):
        get_result_with_repair(wid)
    assert app.sql("SELECT count(*) FROM dbos.workflow_status WHERE forked_from = %s", wid) == [(0,)]
    assert app.sql("SELECT count(*) FROM afterlife.forks WHERE root_workflow_id = %s", wid) == [(0,)]


def test_afterlifes_rewinds_count_against_the_lineages_budget(app: App) -> None:
    wid = diverge(app, _start_agent(app, "t4"))
    # Three repairs already spent on this lineage by afterlife's rewinds (the default budget is 3).
    for n in (1, 2, 3):
        app.sql(
            "INSERT INTO afterlife.rewinds (root_workflow_id, n, application_name, workflow_id, incarnation_ms,"
            " from_step, reason, rewound_by, rewound_at) VALUES (%s, %s, %s, %s, %s, 0, 'diverged', 'test', now())",
            wid,
            n,
            APP,
            wid,
            n,
        )
    with pytest.raises(ForkBudgetExhaustedError) as info:
        get_result_with_repair(wid)
    assert info.value.root_workflow_id == wid
    assert info.value.forks == 3
    assert divergence_of(info.value.last_error) is not None
    assert app.sql("SELECT count(*) FROM dbos.workflow_status WHERE forked_from = %s", wid) == [(0,)]


def test_an_ending_afterlife_claimed_for_a_rewind_is_left_to_it(app: App) -> None:
    wid = diverge(app, _start_agent(app, "t5"))
    (completed_at,) = app.sql("SELECT completed_at FROM dbos.workflow_status WHERE workflow_uuid = %s", wid)[0]
    app.sql(
        "INSERT INTO afterlife.rewinds (root_workflow_id, n, application_name, workflow_id, incarnation_ms,"
        " from_step, reason, rewound_by) VALUES (%s, 1, %s, %s, %s, 0, 'diverged', 'plane')",
        wid,
        APP,
        wid,
        completed_at,
    )
    started = time.monotonic()
    with pytest.raises(Exception) as info:
        get_result_with_repair(wid, repair_timeout_sec=0.6, poll_sec=0.1)
    assert divergence_of(info.value) is not None
    assert time.monotonic() - started >= 0.5
    assert app.sql("SELECT count(*) FROM dbos.workflow_status WHERE forked_from = %s", wid) == [(0,)]


def test_wait_mode_follows_a_fork_made_elsewhere_and_times_out_when_nothing_repairs(app: App) -> None:
    wid = diverge(app, _start_agent(app, "t6"))
    with pytest.raises(Exception) as info:
        get_result_with_repair(wid, repair="wait", repair_timeout_sec=0.5, poll_sec=0.1)
    assert divergence_of(info.value) is not None
    assert app.sql("SELECT count(*) FROM dbos.workflow_status WHERE forked_from = %s", wid) == [(0,)]

    app.hold.set()
    followed: List[str] = []

    def repair_elsewhere() -> None:
        time.sleep(0.5)
        get_result_with_repair(wid)

    t = threading.Thread(target=repair_elsewhere, daemon=True)
    t.start()
    result = get_result_with_repair(
        wid, repair="wait", repair_timeout_sec=BOUND_SEC, poll_sec=0.1, on_rewind=followed.append
    )
    t.join(BOUND_SEC)
    assert result == "answer(browse(plan(t6)))"
    assert followed == []
    assert app.sql("SELECT count(*) FROM dbos.workflow_status WHERE forked_from = %s", wid) == [(1,)]


def test_works_through_a_dbos_client(app: App) -> None:
    from dbos import DBOSClient

    wid = diverge(app, _start_agent(app, "t7"))
    app.hold.set()
    client = DBOSClient(system_database_url=app.url, application_name=APP)
    try:
        assert get_result_with_repair(wid, client=client, poll_sec=0.2) == "answer(browse(plan(t7)))"
    finally:
        client.destroy()
    assert app.sql("SELECT new_workflow_id FROM afterlife.forks WHERE root_workflow_id = %s", wid) == [(fork_id(wid, 1),)]


def test_refuses_bad_input_and_calls_from_inside_a_workflow(app: App) -> None:
    from dbos import DBOS

    invalid: List[Dict[str, Any]] = [
        {"repair": "rewind"},
        {"max_forks": 0},
        {"poll_sec": 0},
        {"repair_timeout_sec": float("nan")},
    ]
    for kwargs in invalid:
        with pytest.raises(ValueError):
            get_result_with_repair("x", **kwargs)
    with pytest.raises(ValueError):
        get_result_with_repair("")
    with pytest.raises(ValueError):
        get_result_with_repair("x", afterlife_schema='afterlife"; DROP TABLE x; --')

    @DBOS.workflow()
    def inside() -> str:
        try:
            get_result_with_repair("anything")
        except RuntimeError as e:
            return str(e)
        return "not refused"

    assert "outside workflows" in inside()


def test_the_async_variant_returns_the_repaired_result_without_blocking_the_loop(app: App) -> None:
    import asyncio

    from afterlife_executor.repair import get_result_with_repair_async

    wid = diverge(app, _start_agent(app, "t8"))
    app.hold.set()

    async def go() -> Any:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        t = asyncio.create_task(ticker())
        try:
            return await asyncio.wait_for(get_result_with_repair_async(wid, poll_sec=0.2), BOUND_SEC)
        finally:
            t.cancel()
            assert ticks > 5, "the event loop was blocked"

    assert asyncio.run(go()) == "answer(browse(plan(t8)))"


def test_the_limiter_refuses_to_wait_inside_a_real_dbos_transaction(app: App) -> None:
    from dbos import DBOS

    from afterlife_executor.limiter import CallLimiterMisuseError, limit_calls

    lim = limit_calls(per_key=1, global_limit=1, acquire_timeout_sec=1)

    @DBOS.transaction()
    def in_transaction() -> str:
        try:
            lim.run("k", lambda: None)
        except CallLimiterMisuseError as e:
            return str(e)
        return "not refused"

    @DBOS.step()
    def in_step() -> str:
        return lim.run("k", lambda: "ran")

    @DBOS.workflow()
    def both() -> List[str]:
        return [in_transaction(), in_step()]

    refused, ran = both()
    assert "@DBOS.step" in refused
    assert ran == "ran"
    assert lim.active() == 0


def test_divergence_of_reads_both_sdks_and_nothing_else() -> None:
    from dbos._error import DBOSUnexpectedStepError

    py = divergence_of(DBOSUnexpectedStepError("wf-1", 3, "browse_step", "search_step"))
    assert py is not None and (py.workflow_id, py.step_id, py.expected_name) == ("wf-1", 3, "browse_step")

    class Portable(Exception):
        def __init__(self, message: str, code: Any) -> None:
            super().__init__(message)
            self.message = message
            self.code = code

    ts = divergence_of(
        Portable("During execution of workflow wf-2 step 0, function a was recorded when b was expected", 26)
    )
    assert ts is not None and (ts.workflow_id, ts.step_id, ts.expected_name) == ("wf-2", 0, "b")
    assert divergence_of(ValueError("boom")) is None
    assert divergence_of(Portable("code without the facts", 26)) is None
    assert divergence_of(None) is None


def test_an_older_dbos_is_refused_naming_the_upgrade() -> None:
    from afterlife_executor.repair import _check_dbos_version, _installed_dbos_version

    assert _installed_dbos_version() == "2.30.0"
    for ok in ("2.23.0", "2.30.0", "2.31.1rc1", "3.0.0"):
        _check_dbos_version(ok)
    for old in ("2.22.9", "2.16.0", "1.14.0", "garbage"):
        with pytest.raises(RuntimeError, match=r"pip install 'dbos>=2.23'"):
            _check_dbos_version(old)
