"""DBOS's sessions named after this executor, so the plane can tell them apart.

DBOS for Python (2.3–2.30) names every session plain ``dbos_transact``. While such a session is open the plane
cannot judge any executor without the kit (unknown is never a death) and says so; with the kit, this process
is judged by its own lease and heartbeat, so its DBOS sessions should say whose they are. At attach the kit
names every new connection of DBOS's engines ``dbos_transact_<executorID>_<version>`` (the name DBOS for
TypeScript gives its pool, and the one the plane's session rule reads), and replaces the pooled connections
DBOS opened before it (a pool recreated: the idle ones close now, the checked-out ones when they come back).
DBOS's notification listener holds one connection for the process's life, opened at launch: its backend is
recorded in the kit's facts instead, so the plane knows that one ``dbos_transact`` session is this kit's.
"""

from __future__ import annotations

from typing import Any, List, Optional

from .log import KitLog

SESSION_PREFIX = "dbos_transact_"


def session_name(executor_id: str, application_version: str) -> str:
    """The name of DBOS for TypeScript's pool for this executor and version (Postgres keeps 63 bytes of it)."""
    return f"{SESSION_PREFIX}{executor_id}_{application_version}"


def name_dbos_sessions(dbos: Any, executor_id: str, application_version: str, log: KitLog) -> None:
    """Names new connections of DBOS's system (and application) engines, and recreates their pools."""
    from sqlalchemy import event

    name = session_name(executor_id, application_version)

    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Its own transaction, committed: a setting made inside the pool's first transaction would be undone
        # by the rollback the pool runs when the connection is first returned.
        was = getattr(dbapi_connection, "autocommit", None)
        try:
            if was is False:
                dbapi_connection.autocommit = True
            cur = dbapi_connection.cursor()
            try:
                cur.execute("SELECT set_config('application_name', %s, false)", (name,))
            finally:
                cur.close()
        finally:
            if was is False:
                dbapi_connection.autocommit = False

    for engine in _engines(dbos):
        try:
            event.listen(engine.pool, "connect", on_connect)
            engine.dispose()
        except Exception as e:  # noqa: BLE001
            log.warn("could not name DBOS's sessions after this executor: the plane reports them as naming no "
                     "executor (harmless to this process, judged by its lease and heartbeat)", err=e,
                     event="dbos_sessions_unnamed")


def unnamed_session_pids(dbos: Any) -> List[int]:
    """Backends of DBOS's connections that keep DBOS's own name: the notification listener's, opened at launch."""
    sys_db = getattr(dbos, "_sys_db_field", None)
    conn = getattr(sys_db, "notification_conn", None)
    pid = _backend_pid(conn)
    return [pid] if pid is not None else []


def _backend_pid(conn: Any) -> Optional[int]:
    raw = getattr(conn, "dbapi_connection", None) or getattr(conn, "driver_connection", None) or conn
    info = getattr(raw, "info", None)
    pid = getattr(info, "backend_pid", None)
    return pid if isinstance(pid, int) and pid > 0 else None


def _engines(dbos: Any) -> List[Any]:
    out: List[Any] = []
    for field in ("_sys_db_field", "_app_db_field"):
        engine = getattr(getattr(dbos, field, None), "engine", None)
        if engine is not None and getattr(getattr(engine, "dialect", None), "name", None) == "postgresql":
            out.append(engine)
    return out
