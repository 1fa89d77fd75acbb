"""The Python kit against the golden vectors the TypeScript contract generates.

``packages/executor/src/contract/vectors.json`` is written by ``test/unit/contractVectors.test.ts`` from the
TypeScript code; here the Python contract must produce and accept exactly the same. The liveness key is
computed by Postgres (both kits send the same expression), so those cases need the server
(AFTERLIFE_TEST_DATABASE_URL, default the local one).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Dict

from afterlife_executor import contract as c

VECTORS_PATH = Path(__file__).resolve().parents[2] / "executor" / "src" / "contract" / "vectors.json"
V: Dict[str, Any] = json.loads(VECTORS_PATH.read_text(encoding="utf-8"))


def _squash(sql: str) -> str:
    return re.sub(r"\s+", " ", sql).strip()


def test_liveness_sql_is_the_contracts() -> None:
    assert c.liveness_key_sql("$1::text", "$2::text") == V["livenessKey"]["sql"]
    assert _squash(c.take_liveness_sql("afterlife")) == _squash(V["livenessKey"]["takeSql"])
    assert _squash(c.fence_check_sql("afterlife")) == _squash(V["fence"]["sql"])


def test_liveness_keys_computed_by_postgres(pg_conn: Any) -> None:
    sql = c.positional(
        f"SELECT ({c.liveness_key_sql('$1::text', '$2::text')})::text AS key, "
        f"(({c.liveness_key_sql('$1::text', '$2::text')} >> 32) & 4294967295)::oid::text AS classid, "
        f"({c.liveness_key_sql('$1::text', '$2::text')} & 4294967295)::oid::text AS objid"
    )
    for case in V["livenessKey"]["cases"]:
        row = pg_conn.execute(sql, {"p1": case["applicationName"], "p2": case["executorId"]}).fetchone()
        assert row == (case["key"], case["classid"], case["objid"]), case


def test_liveness_session_names() -> None:
    for case in V["livenessKey"]["sessionNames"]:
        assert c.liveness_session_name(case["executorId"], case["incarnation"]) == case["name"]


def test_lease() -> None:
    lease = V["lease"]
    assert (c.DEFAULT_LIVENESS_LEASE_MS, c.MIN_LIVENESS_LEASE_MS, c.MAX_LIVENESS_LEASE_MS) == (
        lease["defaultMs"],
        lease["minMs"],
        lease["maxMs"],
    )
    assert (c.LIVENESS_RENEW_EVERY_MS, c.LIVENESS_FENCE_EVERY_MS) == (lease["renewEveryMs"], lease["fenceEveryMs"])
    for case in lease["effective"]:
        assert c.effective_lease(case["configuredMs"], case["inheritedMs"]) == (case["leaseMs"], case["inherited"])


def test_heartbeat_keys_script_and_bounds() -> None:
    hb = V["heartbeat"]
    for case in hb["keys"]:
        assert c.heartbeat_key(case["applicationName"], case["executorId"], case["prefix"]) == case["key"]
        assert c.heartbeat_index_key(case["applicationName"], case["prefix"]) == case["indexKey"]
        assert c.index_marker_key(case["applicationName"], case["prefix"]) == case["markerKey"]
    assert c.WRITE_HEARTBEAT_LUA == hb["writeLua"]
    assert c.HEARTBEAT_BOUNDS == hb["bounds"]


def _check_cases(parser: c.Parser, cases: Any) -> None:
    for case in cases:
        ok, out = parser.safe_parse(case["input"])
        assert ok == case["valid"], (case["input"], out)
        if ok:
            assert out == case["output"], case["input"]


def test_heartbeat_values() -> None:
    _check_cases(c.HeartbeatValue, V["heartbeat"]["values"])


def test_settings() -> None:
    bounds = V["settings"]["bounds"]
    for name, b in bounds.items():
        lo, hi, default, *_ = c.INT_SETTINGS[name]
        assert (lo, hi, default) == (b["min"], b["max"], b["default"]), name
    for case in V["settings"]["cases"]:
        ok, value = c.parse_setting(case["name"], case["raw"])
        assert ok == case["ok"], case
        assert value == (case["value"] if ok else case["problem"]), case


def test_death_notices() -> None:
    dn = V["deathNotice"]
    assert c.EXECUTOR_DEATH_TOPIC == dn["topic"]
    assert list(c.DEATH_REASONS) == dn["reasons"]
    valid = next(x["output"] for x in dn["cases"] if x["valid"])
    assert c.death_notice_attributes(valid) == dn["attributes"]
    assert valid["executorId"] == dn["orderingKey"]
    _check_cases(c.DeathNotice, dn["cases"])


def test_fence_answers_and_channels() -> None:
    f = V["fence"]
    assert c.FENCED_EXIT_CODE == f["exitCode"]
    for ch in f["channels"]:
        assert c.fence_channel(ch["schema"]) == ch["fence"]
        assert c.requeued_channel(ch["schema"]) == ch["requeued"]
        assert c.drain_channel(ch["schema"]) == ch["drain"]
    _check_cases(c.Fence, f["answers"])


def test_requeued_hints() -> None:
    r = V["requeued"]
    assert (c.REQUEUED_NUDGE_TARGETS, c.REQUEUED_MAX_QUEUES) == (r["nudgeTargets"], r["maxQueues"])
    _check_cases(c.RequeuedNotice, r["cases"])


def test_guard() -> None:
    assert (c.REAPER_LEASE_PREFIX, c.GUARD_TICK_WITHIN_MS) == (V["guard"]["leasePrefix"], V["guard"]["tickWithinMs"])
