"""A workflow's result through afterlife's repairs of diverged workflows, for DBOS Python apps.

A plain ``get_result()`` on a workflow whose replay diverged raises DBOS's ``DBOSUnexpectedStepError`` as
soon as it ends ERROR, and again on every later call. ``get_result_with_repair`` is what apps hand-roll as
``get_result_with_auto_fork``, on afterlife's terms:

- ``repair="fork"`` (the default here): it forks the diverged workflow itself, with the planner of the
  TypeScript kit and the plane: the deterministic ID ``<root>-fork-<n>`` (``n``: depth in DBOS's
  ``forked_from`` chain plus one), from the first divergent step (a parent from the step that started the
  diverged child; an app-named child is forked afresh first), onto the latest application version and the
  original's queue; at most ``max_forks`` repairs per lineage (forks and afterlife's rewinds together), then
  ``ForkBudgetExhaustedError``. Whoever acts first makes the fork; everyone else finds it (the primary key).
  When the system database holds afterlife's tables, it writes the fork's ledger row first, as the plane
  does, and leaves a workflow whose ending afterlife has claimed for a rewind to that rewind.
- ``repair="wait"``: it writes nothing and waits for afterlife to rewind the workflow in place (same ID) or
  fork it, then awaits the repaired run.

Why fork is the default here and not in the TypeScript kit: DBOS Python 2.30 has no ``rewind_workflow``,
and it stores errors pickled unless the app uses the portable JSON serializer, so the plane (which reads
errors as JSON) cannot recognise a DBOS Python divergence by itself; waiting for it would time out.

It must be called outside workflows (from request handlers, CLIs, other services): inside a workflow its
waits and forks would not replay deterministically.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import re
import socket
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Literal, Optional, Protocol, Tuple, cast

__all__ = [
    "DEFAULT_MAX_FORKS",
    "DEFAULT_REPAIR_TIMEOUT_SEC",
    "Divergence",
    "ForkBudgetExhaustedError",
    "ForkConflictError",
    "ForkInfo",
    "divergence_of",
    "fork_id",
    "get_result_with_auto_fork",
    "get_result_with_repair",
    "get_result_with_repair_async",
]

log = logging.getLogger("afterlife_executor.repair")

DEFAULT_MAX_FORKS = 3
DEFAULT_REPAIR_TIMEOUT_SEC = 300.0
DEFAULT_POLL_SEC = 1.0

# DBOSUnexpectedStepError's code: DBOSErrorCode.UnexpectedStep is 11 in DBOS Python; DBOS TypeScript's
# dbosErrorCode is 26 (a workflow written by either can be awaited from Python through the portable format).
UNEXPECTED_STEP_CODES = (11, 26)
INTERNAL_QUEUE = "_dbos_internal_queue"
AWAIT_STEP_PREFIX = "DBOS."
_TERMINAL_REPAIRABLE = ("ERROR", "CANCELLED")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
# Both SDKs word the error alike: DBOS Python's _error.py and DBOS TypeScript's error.ts.
_MESSAGE = re.compile(
    r"During execution of workflow (.+?) step (\d+), function (.+?) was recorded when (.+?) was expected",
    re.S,
)


@dataclass(frozen=True)
class Divergence:
    """A replay divergence: the workflow whose replay diverged and its first divergent function_id."""

    workflow_id: str
    step_id: int
    expected_name: Optional[str]
    message: str


def divergence_of(error: object) -> Optional[Divergence]:
    """The divergence an error carries (DBOS Python's exception, a portable or TypeScript one), or None.

    An ordinary error is never a divergence: only code 11/26 or DBOS's own message qualify.
    """
    if error is None:
        return None
    message = getattr(error, "message", None)
    if not isinstance(message, str):
        message = str(error) if isinstance(error, BaseException) else ""
    m = _MESSAGE.search(message)
    code = getattr(error, "dbos_error_code", None)
    if code is None:
        code = getattr(error, "code", None)
    if isinstance(code, str) and code.isdigit():
        code = int(code)
    inputs: object = getattr(error, "inputs", None)
    wid: object = None
    step: object = None
    expected: object = None
    if code in UNEXPECTED_STEP_CODES and isinstance(inputs, tuple):
        # DBOSUnexpectedStepError(workflow_id, step_id, expected_name, recorded_name)
        fields = cast(Tuple[object, ...], inputs)
        if len(fields) == 4:
            wid, step, expected = fields[0], fields[1], fields[2]
    if wid is None and m is not None:
        wid, step, expected = m.group(1), int(m.group(2)), m.group(4)
    if not isinstance(wid, str) or not wid:
        return None
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        return None
    return Divergence(wid, step, expected if isinstance(expected, str) else None, message)


def fork_id(root: str, n: int) -> str:
    """Deterministic: the same root and fork number always name the same fork, so a repeat hits the key."""
    return f"{root}-fork-{n}"


class ForkBudgetExhaustedError(Exception):
    """The lineage kept diverging: ``max_forks`` repairs were made; left for a human."""

    def __init__(self, root_workflow_id: str, forks: int, workflow_id: str, last_error: BaseException) -> None:
        self.root_workflow_id = root_workflow_id
        self.forks = forks
        self.workflow_id = workflow_id
        self.last_error = last_error
        super().__init__(
            f"workflow {root_workflow_id} kept diverging after {forks} forks (last: {workflow_id})"
        )


class ForkConflictError(Exception):
    """The deterministic fork ID exists but was forked from another workflow: permanent, for a human."""

    def __init__(self, new_workflow_id: str, expected_source: str, actual_source: Optional[str]) -> None:
        self.new_workflow_id = new_workflow_id
        self.expected_source = expected_source
        self.actual_source = actual_source
        super().__init__(
            f"workflow {new_workflow_id} exists but was forked from {actual_source or 'nothing'}, "
            f"not {expected_source}"
        )


@dataclass(frozen=True)
class ForkInfo:
    """A fork this helper followed (made here or found made)."""

    from_workflow_id: str
    to_workflow_id: str
    n: int
    start_step: int


@dataclass
class _ChildFork:
    source: str
    new_workflow_id: str
    replacement_children: Dict[str, str]


@dataclass
class _ForkPlan:
    source: str
    root: str
    n: int
    new_workflow_id: str
    start_step: int
    application_version: Optional[str]
    queue_name: Optional[str]
    queue_partition_key: Optional[str]
    reason: Literal["diverged", "child-diverged"]
    diverged_workflow_id: str
    detail: str
    completed_at: Optional[int]
    application_name: Optional[str]
    child: Optional[_ChildFork] = field(default=None)


# --- the DBOS side: the launched DBOS or a DBOSClient, through their public API --------------------------


# What repair reads and calls first appeared in these DBOS Python releases (read from dbos-transact-py's
# tags): fork_workflow onto a queue with replacement children and was_forked_from in 2.16, completed_at in 2.23.
MIN_DBOS_VERSION = (2, 23)


def _check_dbos_version(version: str) -> None:
    """Refuses a DBOS Python older than MIN_DBOS_VERSION, naming the upgrade."""
    m = re.match(r"^(\d+)\.(\d+)", version)
    if m is None or (int(m.group(1)), int(m.group(2))) < MIN_DBOS_VERSION:
        need = ".".join(str(p) for p in MIN_DBOS_VERSION)
        raise RuntimeError(
            f"get_result_with_repair needs DBOS Python {need} or later (fork onto the original's queue, "
            f"was_forked_from, completed_at); this process has dbos {version}: upgrade with pip install 'dbos>={need}'"
        )


def _installed_dbos_version() -> str:
    from importlib.metadata import version

    return version("dbos")


class _Status(Protocol):
    status: str
    error: Optional[Exception]
    forked_from: Optional[str]
    was_forked_from: bool
    completed_at: Optional[int]
    app_version: Optional[str]
    queue_name: Optional[str]
    queue_partition_key: Optional[str]
    parent_workflow_id: Optional[str]
    application_name: Optional[str]


class _Dbos:
    """The calls repair needs, on a DBOSClient when given one, else on the launched DBOS."""

    def __init__(self, client: Any) -> None:
        self.client = client
        if client is None:
            from dbos import DBOS

            self._dbos: Any = DBOS
        else:
            self._dbos = None

    def status(self, workflow_id: str) -> Optional[_Status]:
        if self.client is None:
            return self._dbos.get_workflow_status(workflow_id)  # type: ignore[no-any-return]
        from dbos._error import DBOSNonExistentWorkflowError

        try:
            return self.client.retrieve_workflow(workflow_id).get_status()  # type: ignore[no-any-return]
        except DBOSNonExistentWorkflowError:
            return None

    def result(self, workflow_id: str) -> Any:
        target = self.client if self.client is not None else self._dbos
        return target.retrieve_workflow(workflow_id).get_result()

    def steps(self, workflow_id: str) -> List[Dict[str, Any]]:
        target = self.client if self.client is not None else self._dbos
        return list(target.list_workflow_steps(workflow_id, load_output=False) or [])

    def latest_version(self) -> Optional[str]:
        target = self.client if self.client is not None else self._dbos
        return target.get_latest_application_version()["version_name"]  # type: ignore[no-any-return]

    def fork(
        self,
        source: str,
        start_step: int,
        new_workflow_id: str,
        application_version: Optional[str],
        queue_name: Optional[str],
        queue_partition_key: Optional[str],
        replacement_children: Optional[Dict[str, str]],
    ) -> None:
        from dbos import SetWorkflowID

        target = self.client if self.client is not None else self._dbos
        # DBOS Python takes a fork's ID from the context, as for any workflow it starts.
        with SetWorkflowID(new_workflow_id):
            target.fork_workflow(
                source,
                start_step,
                application_version=application_version,
                queue_name=queue_name,
                queue_partition_key=queue_partition_key,
                replacement_children=replacement_children,
            )

    def engine(self) -> Any:
        """The system database's SQLAlchemy engine (for afterlife's ledger, in the same database)."""
        if self.client is not None:
            return self.client._sys_db.engine
        from dbos._dbos import _get_dbos_instance

        return _get_dbos_instance()._sys_db.engine

    def app_name(self) -> Optional[str]:
        if self.client is not None:
            return getattr(self.client._sys_db, "app_name", None)
        from dbos._dbos import _get_dbos_instance

        config: object = getattr(_get_dbos_instance(), "_config", None)
        name = cast(Dict[str, object], config).get("name") if isinstance(config, dict) else None
        return name if isinstance(name, str) and name else None


# --- afterlife's ledger (migrations 0004 forks, 0009 rewinds), when this database holds it -------------


class _Ledger:
    def __init__(self, dbos: _Dbos, schema: str) -> None:
        if not _IDENT.match(schema):
            raise ValueError(f"afterlife_schema must be a plain SQL identifier, got {schema!r}")
        self.dbos = dbos
        self.schema = schema
        self._present: Optional[bool] = None

    def present(self) -> bool:
        if self._present is None:
            import sqlalchemy as sa

            with self.dbos.engine().connect() as c:
                forks = c.execute(sa.text("SELECT to_regclass(:t)"), {"t": f'"{self.schema}".forks'}).scalar()
                rewinds = c.execute(sa.text("SELECT to_regclass(:t)"), {"t": f'"{self.schema}".rewinds'}).scalar()
            self._present = forks is not None and rewinds is not None
            if not self._present:
                log.warning(
                    "afterlife's ledger (%s.forks, %s.rewinds) is not in this system database: forks made "
                    "here are not recorded and afterlife's rewinds do not count against max_forks; run the "
                    "plane's migrations on this database, or pass afterlife_schema= naming its schema",
                    self.schema,
                    self.schema,
                )
        return self._present

    def rewinds_of(self, root: str) -> int:
        import sqlalchemy as sa

        with self.dbos.engine().connect() as c:
            n = c.execute(
                sa.text(f'SELECT count(*) FROM "{self.schema}".rewinds WHERE root_workflow_id = :root'),
                {"root": root},
            ).scalar()
        return int(n or 0)

    def rewind_claimed(self, workflow_id: str, completed_at: Optional[int]) -> bool:
        """afterlife has claimed this very ending for a rewind: forking it too would run two lineages."""
        if completed_at is None:
            return False
        import sqlalchemy as sa

        with self.dbos.engine().connect() as c:
            row = c.execute(
                sa.text(
                    f'SELECT 1 FROM "{self.schema}".rewinds WHERE workflow_id = :w AND incarnation_ms = :c'
                ),
                {"w": workflow_id, "c": completed_at},
            ).first()
        return row is not None

    def record_fork(self, plan: _ForkPlan, application_name: str) -> None:
        """The fork's row, written before the fork as an intent (as the plane does); a repeat is a no-op."""
        import sqlalchemy as sa

        with self.dbos.engine().begin() as c:
            c.execute(
                sa.text(
                    f'INSERT INTO "{self.schema}".forks'
                    " (root_workflow_id, n, application_name, source_workflow_id, from_step, new_workflow_id,"
                    "  application_version, reason, diverged_workflow_id, detail, forked_by, child_fork_id)"
                    " VALUES (:root, :n, :app, :source, :from_step, :new_id, :version, :reason, :diverged,"
                    "  :detail, :forked_by, :child)"
                    " ON CONFLICT DO NOTHING"
                ),
                {
                    "root": plan.root,
                    "n": plan.n,
                    "app": application_name,
                    "source": plan.source,
                    "from_step": plan.start_step,
                    "new_id": plan.new_workflow_id,
                    "version": plan.application_version,
                    "reason": plan.reason,
                    "diverged": plan.diverged_workflow_id,
                    "detail": plan.detail,
                    "forked_by": f"{socket.gethostname()}:{os.getpid()}",
                    "child": plan.child.new_workflow_id if plan.child else None,
                },
            )


# --- planning: the TypeScript kit's planDivergenceFork, step for step ----------------------------------


def _lineage_of(dbos: _Dbos, workflow_id: str, forked_from: Optional[str]) -> Tuple[str, int]:
    root, nxt, depth = workflow_id, forked_from, 0
    seen = {workflow_id}
    while nxt and nxt not in seen and depth < 1000:
        seen.add(nxt)
        root = nxt
        depth += 1
        up = dbos.status(nxt)
        nxt = up.forked_from if up is not None else None
    return root, depth


def _queue_of(status: _Status) -> Tuple[Optional[str], Optional[str]]:
    if not status.queue_name or status.queue_name == INTERNAL_QUEUE:
        return None, None
    return status.queue_name, status.queue_partition_key or None


def _child_start(dbos: _Dbos, parent_id: str, descendant_id: str) -> Optional[Tuple[str, int]]:
    """The step that started the parent's direct child on the path to the diverged descendant."""
    steps = dbos.steps(parent_id)

    def start_row(child_id: str) -> Optional[int]:
        ids = [
            int(s["function_id"])
            for s in steps
            if s.get("child_workflow_id") == child_id and not str(s.get("function_name", "")).startswith(AWAIT_STEP_PREFIX)
        ]
        return min(ids) if ids else None

    child_id: Optional[str] = descendant_id
    hops = 0
    while child_id and hops < 100:
        step = start_row(child_id)
        if step is not None:
            return child_id, step
        up = dbos.status(child_id)
        child_id = up.parent_workflow_id if up is not None else None
        hops += 1
    return None


@dataclass
class _Planned:
    kind: Literal["fork", "exhausted", "skip"]
    plan: Optional[_ForkPlan] = None
    root: str = ""
    n: int = 0
    why: str = ""


def _plan_divergence_fork(
    dbos: _Dbos, workflow_id: str, max_forks: int, target_version: str, prior_rewinds: Callable[[str], int]
) -> _Planned:
    status = dbos.status(workflow_id)
    if status is None:
        return _Planned("skip", why="missing")
    if status.status != "ERROR":
        return _Planned("skip", why="not-diverged")
    d = divergence_of(status.error)
    if d is None:
        return _Planned("skip", why="not-diverged")

    start_step = d.step_id
    reason: Literal["diverged", "child-diverged"] = "diverged"
    explicit_child: Optional[str] = None
    if d.workflow_id != workflow_id:
        start = _child_start(dbos, workflow_id, d.workflow_id)
        if start is None:
            # Awaited (retrieve_workflow().get_result()) rather than started here: a fork would await the
            # same failed workflow again. Left for a human, never looped on.
            return _Planned("skip", why=f"error names {d.workflow_id}, which {workflow_id} did not start")
        child_id, start_step = start
        reason = "child-diverged"
        # DBOS names a child f"{parent}-{function_id}" unless the app chose an ID.
        if child_id != f"{workflow_id}-{start_step}":
            explicit_child = child_id

    root, depth = _lineage_of(dbos, workflow_id, status.forked_from)
    n = depth + 1
    rewinds = prior_rewinds(root)
    if n + rewinds > max_forks:
        return _Planned("exhausted", root=root, n=n + rewinds, why=d.message)
    new_id = fork_id(root, n)
    version = dbos.latest_version() if target_version == "latest" else status.app_version
    queue_name, partition = _queue_of(status)
    plan = _ForkPlan(
        source=workflow_id,
        root=root,
        n=n,
        new_workflow_id=new_id,
        start_step=start_step,
        application_version=version,
        queue_name=queue_name,
        queue_partition_key=partition,
        reason=reason,
        diverged_workflow_id=d.workflow_id,
        detail=d.message,
        completed_at=status.completed_at,
        # DBOS Python records the owning application from 2.30 on.
        application_name=getattr(status, "application_name", None),
    )
    if explicit_child is not None:
        # Not DBOS's default child name, so that a later divergence of this child is again seen as app-named.
        fresh = f"{new_id}-child-{start_step}"
        # Fork the parent past the start row (copied, remapped to the fresh child), which then starts from 0.
        plan.start_step = start_step + 1
        plan.child = _ChildFork(explicit_child, fresh, {explicit_child: fresh})
    return _Planned("fork", plan=plan, root=root, n=n)


def _is_unique_violation(err: BaseException) -> bool:
    e: Optional[BaseException] = err
    for _ in range(6):
        if e is None:
            return False
        if getattr(e, "sqlstate", None) == "23505" or getattr(e, "pgcode", None) == "23505":
            return True
        e = getattr(e, "orig", None) or e.__cause__
    return False


def _fork_once(
    dbos: _Dbos,
    source: str,
    new_id: str,
    start_step: int,
    version: Optional[str],
    queue: Tuple[Optional[str], Optional[str]],
    replacement_children: Optional[Dict[str, str]] = None,
) -> Literal["forked", "already-forked"]:
    """One fork through DBOS's own fork_workflow (one transaction over every table it copies)."""
    try:
        dbos.fork(source, start_step, new_id, version, queue[0], queue[1], replacement_children)
        return "forked"
    except Exception as err:
        if not _is_unique_violation(err):
            raise
        existing = dbos.status(new_id)
        actual = existing.forked_from if existing is not None else None
        if actual != source:
            raise ForkConflictError(new_id, source, actual) from err
        return "already-forked"


def _execute_plan(dbos: _Dbos, plan: _ForkPlan) -> Literal["forked", "already-forked"]:
    """The fresh child first (when there is one), then the fork itself."""
    if plan.child is not None:
        child = dbos.status(plan.child.source)
        _fork_once(
            dbos,
            plan.child.source,
            plan.child.new_workflow_id,
            0,
            plan.application_version,
            _queue_of(child) if child is not None else (None, None),
        )
    return _fork_once(
        dbos,
        plan.source,
        plan.new_workflow_id,
        plan.start_step,
        plan.application_version,
        (plan.queue_name, plan.queue_partition_key),
        plan.child.replacement_children if plan.child else None,
    )


# --- following repairs ---------------------------------------------------------------------------------


def _fork_of(dbos: _Dbos, workflow_id: str, forked_from: Optional[str]) -> Optional[str]:
    """The fork of ``workflow_id`` afterlife (or this helper) made: the deterministic <root>-fork-<depth+1>."""
    root, depth = _lineage_of(dbos, workflow_id, forked_from)
    candidate = fork_id(root, depth + 1)
    found = dbos.status(candidate)
    return candidate if found is not None and found.forked_from == workflow_id else None


@dataclass
class _Options:
    repair: Literal["fork", "wait"]
    max_forks: int
    target_version: Literal["latest", "original"]
    repair_timeout_sec: float
    poll_sec: float
    on_fork: Optional[Callable[[ForkInfo], None]]
    on_rewind: Optional[Callable[[str], None]]
    application_name: Optional[str]


def _await_repair(dbos: _Dbos, wid: str, err: BaseException, o: _Options, seen: Optional[_Status] = None) -> str:
    """Waits for afterlife to repair ``wid`` after it failed with ``err``: the ID to await next."""
    first = seen if seen is not None else dbos.status(wid)
    repairable = first is not None and (
        divergence_of(err) is not None or divergence_of(first.error) is not None or first.status == "CANCELLED"
    )
    if first is None or not repairable:
        raise err
    deadline = time.monotonic() + o.repair_timeout_sec
    while True:
        now = dbos.status(wid)
        if now is None:
            raise err
        if now.was_forked_from:
            nxt = _fork_of(dbos, wid, now.forked_from)
            if nxt is not None:
                return nxt
        # Left its ending (rewound: ENQUEUED, PENDING), or ended again since: await the new run.
        if now.status not in _TERMINAL_REPAIRABLE or now.completed_at != first.completed_at:
            if o.on_rewind is not None:
                o.on_rewind(wid)
            return wid
        if time.monotonic() >= deadline:
            raise err
        time.sleep(o.poll_sec)


def _fork_here(dbos: _Dbos, ledger: _Ledger, current: str, err: BaseException, o: _Options) -> str:
    if divergence_of(err) is None:
        status = dbos.status(current)
        if status is None or status.status != "CANCELLED" or not status.was_forked_from:
            raise err
        nxt = _fork_of(dbos, current, status.forked_from)
        if nxt is None:
            raise err
        return nxt
    has_ledger = ledger.present()
    planned = _plan_divergence_fork(
        dbos,
        current,
        o.max_forks,
        o.target_version,
        ledger.rewinds_of if has_ledger else (lambda _root: 0),
    )
    if planned.kind == "exhausted":
        raise ForkBudgetExhaustedError(planned.root, planned.n - 1, current, err) from err
    if planned.kind == "skip" or planned.plan is None:
        raise err
    plan = planned.plan
    if has_ledger:
        if ledger.rewind_claimed(current, plan.completed_at):
            return _await_repair(dbos, current, err, o)
        app = o.application_name or plan.application_name or dbos.app_name()
        if not app:
            raise ValueError(
                "get_result_with_repair: the application's name could not be read from DBOS or the "
                "workflow; pass application_name= (the plane's APPLICATION_NAME) so the fork is ledgered"
            )
        ledger.record_fork(plan, app)
    outcome = _execute_plan(dbos, plan)
    log.info(
        "diverged workflow %s: %s %s from step %d (lineage %s, repair %d of %d)",
        current,
        "forked as" if outcome == "forked" else "already forked as",
        plan.new_workflow_id,
        plan.start_step,
        plan.root,
        plan.n,
        o.max_forks,
    )
    if o.on_fork is not None:
        o.on_fork(ForkInfo(current, plan.new_workflow_id, plan.n, plan.start_step))
    return plan.new_workflow_id


def _positive_finite(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"get_result_with_repair: {name} must be a finite number > 0, got {value!r}")
    return float(value)


def _refuse_inside_workflow() -> None:
    try:
        from dbos._context import get_local_dbos_context
    except ImportError:  # a DBOS without this context API: nothing to check against
        return
    ctx = get_local_dbos_context()
    if ctx is not None and ctx.is_within_workflow():
        raise RuntimeError(
            "get_result_with_repair must be called outside workflows: inside one its waits and forks would "
            "not replay deterministically; await the workflow with DBOS.get_result there"
        )


def get_result_with_repair(
    workflow_id: str,
    *,
    client: Any = None,
    repair: Literal["fork", "wait"] = "fork",
    max_forks: int = DEFAULT_MAX_FORKS,
    target_version: Literal["latest", "original"] = "latest",
    repair_timeout_sec: float = DEFAULT_REPAIR_TIMEOUT_SEC,
    poll_sec: float = DEFAULT_POLL_SEC,
    on_fork: Optional[Callable[[ForkInfo], None]] = None,
    on_rewind: Optional[Callable[[str], None]] = None,
    application_name: Optional[str] = None,
    afterlife_schema: Optional[str] = None,
) -> Any:
    """Awaits ``workflow_id``'s result through repairs of a replay divergence; returns the repaired result.

    ``client``: a ``dbos.DBOSClient`` (default: the launched ``DBOS``). ``repair``: ``"fork"`` forks here
    (bounded, deterministic, ledgered), ``"wait"`` waits up to ``repair_timeout_sec`` for afterlife's rewind
    or fork. Raises the workflow's own error when it is not a divergence (an ordinary ERROR is never
    repaired), ``ForkBudgetExhaustedError`` when the lineage spent ``max_forks`` repairs, and
    ``ForkConflictError`` when the deterministic fork ID belongs to another workflow.
    ``afterlife_schema`` defaults to ``AFTERLIFE_SCHEMA``, else ``afterlife``.
    """
    if not isinstance(workflow_id, str) or not workflow_id:
        raise ValueError("get_result_with_repair: workflow_id must be a non-empty string")
    if repair not in ("fork", "wait"):
        raise ValueError(f'get_result_with_repair: repair must be "fork" or "wait", got {repair!r}')
    if target_version not in ("latest", "original"):
        raise ValueError(f'get_result_with_repair: target_version must be "latest" or "original", got {target_version!r}')
    if isinstance(max_forks, bool) or not isinstance(max_forks, int) or max_forks < 1:
        raise ValueError(f"get_result_with_repair: max_forks must be a positive integer, got {max_forks!r}")
    o = _Options(
        repair=repair,
        max_forks=max_forks,
        target_version=target_version,
        repair_timeout_sec=_positive_finite("repair_timeout_sec", repair_timeout_sec),
        poll_sec=_positive_finite("poll_sec", poll_sec),
        on_fork=on_fork,
        on_rewind=on_rewind,
        application_name=application_name,
    )
    ledger_schema = afterlife_schema or os.environ.get("AFTERLIFE_SCHEMA") or "afterlife"
    _check_dbos_version(_installed_dbos_version())
    _refuse_inside_workflow()
    dbos = _Dbos(client)
    ledger = _Ledger(dbos, ledger_schema)
    current = workflow_id
    while True:
        try:
            return dbos.result(current)
        except Exception as err:
            if o.repair == "fork":
                current = _fork_here(dbos, ledger, current, err, o)
            else:
                current = _await_repair(dbos, current, err, o)


async def get_result_with_repair_async(workflow_id: str, **kwargs: Any) -> Any:
    """``get_result_with_repair`` for coroutines: the same, in a worker thread, so the loop keeps running."""
    return await asyncio.to_thread(get_result_with_repair, workflow_id, **kwargs)


def get_result_with_auto_fork(workflow_id: str, **kwargs: Any) -> Any:
    """The name apps hand-roll: ``get_result_with_repair`` with ``repair="fork"``."""
    kwargs["repair"] = "fork"
    return get_result_with_repair(workflow_id, **kwargs)
