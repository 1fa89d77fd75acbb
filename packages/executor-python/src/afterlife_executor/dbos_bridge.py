"""What the kit reads from, and asks of, the DBOS for Python the app launched.

Read from DBOS's own objects (2.30.0's layout; ``docs`` of the repository name the lines): the launched
instance's configuration (application name, system database URL and schema), ``GlobalParams`` (executor ID,
application version, DBOS's version), the in-process running workflows (``_active_workflows_set``), the stop
events that end queue polling (what ``DBOS.destroy`` sets first), and the queue claim its queue threads run
(``SystemDatabase.start_queued_workflows`` then ``execute_dequeued_workflow``). A release that moves any of
them makes the matching capability answer "unavailable", said once at attach, never a crash.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

from .log import KitLog

# One early poll per queue at most this often: a burst of hints becomes a few polls DBOS would run anyway.
MIN_EARLY_POLL_GAP_S = 0.25


class DbosNotLaunchedError(RuntimeError):
    pass


def _plain_postgres_url(url: str) -> str:
    """SQLAlchemy's ``postgresql+psycopg://`` as libpq's ``postgresql://`` (the same database)."""
    from sqlalchemy.engine import make_url

    u = make_url(url)
    if not u.drivername.split("+")[0] in ("postgresql", "postgres"):
        raise ValueError(f"DBOS's system database is {u.drivername}, not Postgres: afterlife needs Postgres")
    return u.set(drivername="postgresql").render_as_string(hide_password=False)


@dataclass
class DbosApp:
    dbos: Any
    executor_id: str
    application_version: str
    application_name: Optional[str]
    system_database_url: Optional[str]
    system_schema: Optional[str]
    dbos_version: Optional[str]

    def running_ids(self) -> Optional[List[str]]:
        try:
            return list(self.dbos._active_workflows_set.activeList())
        except Exception:
            return None

    def running_count(self) -> Optional[int]:
        ids = self.running_ids()
        return None if ids is None else len(ids)

    def stop_intake(self) -> None:
        """Stops queue polling and event pollers (scheduler, Kafka), as DBOS.destroy does first; running work goes on."""
        for ev in list(getattr(self.dbos, "poller_stop_events", [])) + list(
                getattr(self.dbos, "background_thread_stop_events", [])):
            try:
                ev.set()
            except Exception:
                pass

    def wait_idle(self, timeout_s: float, cancelled: threading.Event) -> bool:
        """Waits until no workflow runs in this process (True), the timeout passes or ``cancelled`` is set."""
        deadline = time.monotonic() + timeout_s
        while True:
            n = self.running_count()
            if n == 0:
                return True
            left = deadline - time.monotonic()
            if left <= 0 or cancelled.wait(min(0.05, left)):
                return False


def launched_dbos() -> DbosApp:
    """The DBOS this process launched; DbosNotLaunchedError before ``DBOS.launch()``."""
    try:
        from dbos import _dbos as dbos_module
        from dbos._dbos_config import get_system_database_url
        from dbos._utils import GlobalParams
    except ImportError as e:
        raise DbosNotLaunchedError(f"attach_executor: DBOS for Python is not importable ({e})") from e
    inst = getattr(dbos_module, "_dbos_global_instance", None)
    if inst is None or not getattr(inst, "_launched", False):
        raise DbosNotLaunchedError("attach_executor: call DBOS.launch() first")
    cfg: Dict[str, Any] = getattr(inst, "_config", {}) or {}
    url: Optional[str]
    try:
        url = _plain_postgres_url(get_system_database_url(cfg))  # type: ignore[arg-type]
    except ValueError:
        raise
    except Exception:
        url = None
    return DbosApp(
        dbos=inst,
        executor_id=str(GlobalParams.executor_id),
        application_version=str(GlobalParams.app_version),
        application_name=(GlobalParams.app_name or cfg.get("name")),
        system_database_url=url,
        system_schema=cfg.get("dbos_system_schema") or "dbos",
        dbos_version=getattr(GlobalParams, "dbos_version", None),
    )


class QueuePoller:
    """Runs DBOS's own claim-and-dispatch for some queues once, now, instead of at their next scheduled poll.

    Only queues without flow control: DBOS counts worker concurrency in this process between its own polls,
    so a second claim racing the scheduled one could pass a limit; those keep DBOS's cadence. The internal
    queue, where recovered direct starts go, has no limit, and its claim skips locked rows.
    """

    def __init__(self, app: DbosApp, log: KitLog) -> None:
        self.app = app
        self.log = log
        self._last: Dict[str, float] = {}
        self._lock = threading.Lock()

    @staticmethod
    def available(app: DbosApp) -> bool:
        try:
            from dbos._core import execute_dequeued_workflow  # noqa: F401
        except ImportError:
            return False
        sys_db = getattr(app.dbos, "_sys_db_field", None)
        return (sys_db is not None and callable(getattr(sys_db, "start_queued_workflows", None))
                and hasattr(getattr(app.dbos, "_registry", None), "queue_info_map"))

    def _queue(self, name: str) -> Any:
        from dbos._utils import INTERNAL_QUEUE_NAME

        if name == INTERNAL_QUEUE_NAME:
            return self.app.dbos._registry.get_internal_queue()
        return self.app.dbos._registry.queue_info_map.get(name)

    @staticmethod
    def _free(queue: Any) -> bool:
        return (getattr(queue, "_concurrency", 1) is None and getattr(queue, "_worker_concurrency", 1) is None
                and getattr(queue, "_limiter", 1) is None and getattr(queue, "_partition_queue", True) is False)

    def poll(self, queues: Sequence[str]) -> List[str]:
        """Starts one claim of each named queue this process may poll early; returns the names polled."""
        polled: List[str] = []
        now = time.monotonic()
        with self._lock:
            for name in queues:
                q = self._queue(name)
                if q is None or not self._free(q) or now - self._last.get(name, -1e9) < MIN_EARLY_POLL_GAP_S:
                    continue
                self._last[name] = now
                polled.append(name)
                threading.Thread(target=self._claim, args=(q,), name=f"afterlife-claim-{name}", daemon=True).start()
        return polled

    def _claim(self, queue: Any) -> None:
        from dbos._core import execute_dequeued_workflow
        from dbos._utils import GlobalParams

        dbos = self.app.dbos
        try:
            running = dbos._active_workflows_set.count_for_queue(queue.name, None)
            ids = dbos._sys_db.start_queued_workflows(queue, GlobalParams.executor_id, GlobalParams.app_version,
                                                      None, running)
        except Exception as e:  # noqa: BLE001 - lock contention with the scheduled poll is expected
            self.log.debug("early queue claim did not run; DBOS's own poll claims it", queue=queue.name, err=e)
            return
        for wid in ids:
            try:
                status = dbos._sys_db.get_workflow_status(wid)
                if status is None:
                    continue
                execute_dequeued_workflow(dbos, status)
            except Exception as e:  # noqa: BLE001
                self.log.warn("a workflow claimed early could not be started here", workflowId=wid, err=e)


