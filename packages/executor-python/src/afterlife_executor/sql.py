"""The kit's statements against afterlife's registry and DBOS's system tables.

The same statements as the TypeScript kit's (``packages/executor/src/db/queries/`` and ``dbos/``): the plane
reads what they write, so they are kept in the contract's ``$n`` form and converted for psycopg. Every write
re-checks its premise in the one statement (an incarnation that is no longer the row's changes nothing).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Dict, List, Optional, Tuple

from .contract import (
    REAPER_LEASE_PREFIX,
    fence_channel,
    fence_check_sql,
    ident,
    positional,
    take_liveness_sql,
)


def _params(*values: Any) -> Dict[str, Any]:
    return {f"p{i + 1}": v for i, v in enumerate(values)}


def register_alive(conn: Any, schema: str, *, application_name: str, executor_id: str, application_version: str,
                   started_at: datetime, heartbeats: bool, liveness: bool, incarnation: str) -> Tuple[bool, Optional[str]]:
    """This incarnation into the registry (a later-started one already there is left alone).

    Returns (ours, the incarnation this one took the row from while it was live).
    """
    t = f"{ident(schema)}.executors"
    sql = f"""WITH up AS (
       INSERT INTO {t} AS x (application_name, executor_id, application_version, state, started_at, last_seen_at, heartbeats, liveness, incarnation)
       VALUES ($1, $2, $3, 'alive', $4, now(), $5, $6, $7)
       ON CONFLICT (application_name, executor_id) DO UPDATE
          SET application_version = EXCLUDED.application_version, last_seen_at = now(), heartbeats = EXCLUDED.heartbeats,
              liveness = EXCLUDED.liveness,
              started_at = CASE WHEN x.incarnation IS DISTINCT FROM EXCLUDED.incarnation THEN EXCLUDED.started_at ELSE COALESCE(x.started_at, EXCLUDED.started_at) END,
              state = CASE WHEN x.incarnation IS DISTINCT FROM EXCLUDED.incarnation THEN 'alive' ELSE x.state END,
              state_changed_at = CASE WHEN x.incarnation IS DISTINCT FROM EXCLUDED.incarnation THEN now() ELSE x.state_changed_at END,
              reason = CASE WHEN x.incarnation IS DISTINCT FROM EXCLUDED.incarnation THEN NULL ELSE x.reason END,
              detected_by = CASE WHEN x.incarnation IS DISTINCT FROM EXCLUDED.incarnation THEN NULL ELSE x.detected_by END,
              liveness_pid = CASE WHEN x.incarnation IS DISTINCT FROM EXCLUDED.incarnation THEN NULL ELSE x.liveness_pid END,
              liveness_usesysid = CASE WHEN x.incarnation IS DISTINCT FROM EXCLUDED.incarnation THEN NULL ELSE x.liveness_usesysid END,
              liveness_backend_start = CASE WHEN x.incarnation IS DISTINCT FROM EXCLUDED.incarnation THEN NULL ELSE x.liveness_backend_start END,
              superseded_incarnation = CASE WHEN x.incarnation IS NOT DISTINCT FROM EXCLUDED.incarnation THEN x.superseded_incarnation
                                            WHEN x.incarnation IS NOT NULL AND x.state IN ('alive', 'draining') THEN x.incarnation END,
              superseded_pid = CASE WHEN x.incarnation IS NOT DISTINCT FROM EXCLUDED.incarnation THEN x.superseded_pid
                                    WHEN x.incarnation IS NOT NULL AND x.state IN ('alive', 'draining') THEN x.liveness_pid END,
              superseded_backend_start = CASE WHEN x.incarnation IS NOT DISTINCT FROM EXCLUDED.incarnation THEN x.superseded_backend_start
                                              WHEN x.incarnation IS NOT NULL AND x.state IN ('alive', 'draining') THEN x.liveness_backend_start END,
              superseded_at = CASE WHEN x.incarnation IS NOT DISTINCT FROM EXCLUDED.incarnation THEN x.superseded_at
                                   WHEN x.incarnation IS NOT NULL AND x.state IN ('alive', 'draining') THEN now() END,
              incarnation = EXCLUDED.incarnation
        WHERE CASE WHEN EXCLUDED.incarnation IS NULL OR x.incarnation IS NOT DISTINCT FROM EXCLUDED.incarnation THEN x.state <> 'dead'
                   ELSE x.started_at IS NULL OR x.started_at <= EXCLUDED.started_at END
       RETURNING x.superseded_incarnation
     )
     SELECT EXISTS (SELECT 1 FROM up) AS ours, (SELECT superseded_incarnation FROM up) AS superseded,
            -- The superseded process asks its fence question at once instead of at its next periodic one.
            (SELECT count(pg_notify($8, json_build_object('applicationName', $1::text, 'executorId', $2::text, 'incarnation', $7::text)::text))
               FROM up WHERE up.superseded_incarnation IS NOT NULL) AS hinted"""
    row = conn.execute(
        positional(sql),
        _params(application_name, executor_id, application_version, started_at, heartbeats, liveness, incarnation,
                fence_channel(schema)),
    ).fetchone()
    ours = bool(row and row[0])
    return ours, (row[1] if ours and row else None)


def set_state(conn: Any, schema: str, *, application_name: str, executor_id: str, state: str,
              reason: Optional[str], detected_by: Optional[str], application_version: Optional[str],
              incarnation: Optional[str]) -> None:
    """Moves this incarnation's row to a new state; a move to ``dead`` is announced on the fence channel."""
    t = f"{ident(schema)}.executors"
    sql = f"""WITH up AS (
       INSERT INTO {t} AS x (application_name, executor_id, application_version, state, reason, detected_by, incarnation)
       VALUES ($1, $2, $3, $4, $5, $6, $8)
       ON CONFLICT (application_name, executor_id) DO UPDATE
          SET state = EXCLUDED.state,
              state_changed_at = CASE WHEN x.state = EXCLUDED.state THEN x.state_changed_at ELSE now() END,
              reason = CASE WHEN x.state = EXCLUDED.state THEN COALESCE(x.reason, EXCLUDED.reason) ELSE EXCLUDED.reason END,
              detected_by = CASE WHEN x.state = EXCLUDED.state THEN COALESCE(x.detected_by, EXCLUDED.detected_by) ELSE EXCLUDED.detected_by END,
              application_version = COALESCE(x.application_version, EXCLUDED.application_version),
              last_seen_at = CASE WHEN EXCLUDED.state = 'dead' THEN x.last_seen_at ELSE now() END
        WHERE (x.state <> 'dead' OR EXCLUDED.state = 'dead')
          AND ($8::text IS NULL OR x.incarnation IS NULL OR x.incarnation = $8)
       RETURNING x.state, x.incarnation
     )
     SELECT pg_notify($7, json_build_object('applicationName', $1::text, 'executorId', $2::text, 'incarnation', up.incarnation)::text)
       FROM up WHERE up.state = 'dead'"""
    conn.execute(
        positional(sql),
        _params(application_name, executor_id, application_version, state, reason, detected_by,
                fence_channel(schema), incarnation),
    )


def record_kit_facts(conn: Any, schema: str, *, application_name: str, executor_id: str,
                     facts: Dict[str, Any]) -> bool:
    """This incarnation's facts on its registry row, for the plane's doctor (only while the row is its own)."""
    cur = conn.execute(
        positional(
            f"""UPDATE {ident(schema)}.executors
        SET kit_facts = $4::jsonb || jsonb_build_object('recordedAt', now())
      WHERE application_name = $1 AND executor_id = $2 AND incarnation = $3"""
        ),
        _params(application_name, executor_id, facts["incarnation"], json.dumps(facts)),
    )
    return (cur.rowcount or 0) > 0


def record_kit_refusal(conn: Any, schema: str, *, application_name: str, executor_id: str, incarnation: str,
                       reason: str, detail: str) -> None:
    """A refused attach, so doctor can name a kit that exited without registering (old ones dropped)."""
    t = f"{ident(schema)}.kit_refusals"
    conn.execute(
        positional(
            f"""WITH old AS (DELETE FROM {t} WHERE application_name = $1 AND refused_at < now() - interval '7 days')
     INSERT INTO {t} (application_name, executor_id, incarnation, reason, detail)
     VALUES ($1, $2, $3, left($4, 100), left($5, 2000)) ON CONFLICT DO NOTHING"""
        ),
        _params(application_name, executor_id, incarnation, reason, detail),
    )


VERSION_REQUEST_SLACK_MS = 15 * 60_000


def find_drain_request(conn: Any, schema: str, *, application_name: str, executor_id: str,
                       application_version: str) -> Optional[Tuple[int, int]]:
    """The earliest drain request for this executor or its version still in force: (id, budget ms)."""
    row = conn.execute(
        positional(
            f"""SELECT id, budget_ms FROM {ident(schema)}.drain_requests
      WHERE application_name = $1
        AND (executor_id = $2
             OR (application_version = $3 AND requested_at > now() - make_interval(secs => (budget_ms + $4) / 1000.0)))
      ORDER BY requested_at, id LIMIT 1"""
        ),
        _params(application_name, executor_id, application_version, VERSION_REQUEST_SLACK_MS),
    ).fetchone()
    return (int(row[0]), int(row[1])) if row else None


def plane_ticks(conn: Any, schema: str, limit: int = 20) -> List[Tuple[str, int]]:
    """Every reaper lease that recorded a tick, newest first: (application, ms since its last tick)."""
    rows = conn.execute(
        positional(
            f"""SELECT substr(name, length($1::text) + 1) AS app,
            greatest(0, (EXTRACT(EPOCH FROM now() - last_tick_at) * 1000)::bigint) AS since_ms
       FROM {ident(schema)}.leases
      WHERE starts_with(name, $1::text) AND last_tick_at IS NOT NULL
      ORDER BY last_tick_at DESC
      LIMIT $2"""
        ),
        _params(REAPER_LEASE_PREFIX, limit),
    ).fetchall()
    return [(str(r[0]), int(r[1])) for r in rows]


def pending_by_version(conn: Any, dbos_schema: str, *, application_name: str,
                       executor_id: str) -> List[Tuple[Optional[str], int]]:
    """PENDING rows this executor still owns, per application version (NULL application: every app's)."""
    rows = conn.execute(
        positional(
            f"""SELECT application_version, count(*) AS n
       FROM {ident(dbos_schema)}.workflow_status
      WHERE status = 'PENDING' AND executor_id = $1 AND (application_name = $2 OR application_name IS NULL)
      GROUP BY application_version ORDER BY application_version NULLS FIRST"""
        ),
        _params(executor_id, application_name),
    ).fetchall()
    return [(r[0], int(r[1])) for r in rows]


def find_table(conn: Any, name: str) -> Optional[str]:
    row = conn.execute("SELECT to_regclass(%(p1)s)::text", _params(name)).fetchone()
    return row[0] if row else None


def ask_fence(conn: Any, schema: str, *, application_name: str, executor_id: str, since: datetime,
              incarnation: Optional[str]) -> Any:
    """The fence question on the liveness session: the raw answer, None when not fenced."""
    row = conn.execute(
        positional(fence_check_sql(schema)), _params(application_name, executor_id, since, incarnation)
    ).fetchone()
    return row[0] if row else None


def take_liveness(conn: Any, schema: str, *, application_name: str, executor_id: str, incarnation: str) -> bool:
    row = conn.execute(
        positional(take_liveness_sql(schema)), _params(application_name, executor_id, incarnation)
    ).fetchone()
    return bool(row and row[0])


def idle_session_timeout_ms(conn: Any) -> int:
    row = conn.execute("SELECT setting FROM pg_settings WHERE name = 'idle_session_timeout'").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def backend_identity(conn: Any) -> Tuple[int, str]:
    row = conn.execute(
        "SELECT pg_backend_pid(), (SELECT backend_start FROM pg_stat_get_activity(pg_backend_pid()))::text"
    ).fetchone()
    return (int(row[0]), str(row[1] or "")) if row else (0, "")
