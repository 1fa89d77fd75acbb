"""The afterlife executor contract, as the Python kit speaks it.

The same contract as the TypeScript kit's ``packages/executor/src/contract/``: the liveness lock's key and
statement, the lease bounds, the heartbeat key, value and Lua script, the shared settings, the death notice,
the fence answer and the requeued hint. ``tests/test_contract_vectors.py`` holds this module to the golden
vectors the TypeScript contract generates (``packages/executor/src/contract/vectors.json``), so neither kit
can drift from the other without a failing test.

Strings are measured in UTF-16 code units, as JavaScript's ``String.length`` counts them: the plane (in
TypeScript) validates with that unit, so a 512-character bound means the same text on both sides.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Literal, Mapping, Optional, Sequence, Tuple, Union

# ---------------------------------------------------------------------------------------------------- parsing


class ContractParseError(ValueError):
    """Every issue of one input at once, each ``path: message`` (the TypeScript contract's shape)."""

    def __init__(self, issues: List[Tuple[List[Union[str, int]], str]]) -> None:
        self.issues = issues
        super().__init__("; ".join(f"{'.'.join(str(p) for p in path) or '(root)'}: {msg}" for path, msg in issues))


_Absent = object()
Check = Callable[[Any, List[Union[str, int]], List[Tuple[List[Union[str, int]], str]]], Any]
MAX_SAFE_INTEGER = 2**53 - 1


def utf16_len(s: str) -> int:
    """The length JavaScript reports for ``s`` (astral characters count twice)."""
    return len(s.encode("utf-16-le")) // 2


def _string(min_len: Optional[int] = None, max_len: Optional[int] = None, pattern: Optional["re.Pattern[str]"] = None,
            no_nul: bool = False) -> Check:
    def check(v: Any, path: List[Union[str, int]], issues: List[Tuple[List[Union[str, int]], str]]) -> Any:
        if not isinstance(v, str):
            issues.append((list(path), "expected string"))
            return _Absent
        n = utf16_len(v)
        before = len(issues)
        if min_len is not None and n < min_len:
            issues.append((list(path), f"expected string to have >={min_len} characters"))
        if max_len is not None and n > max_len:
            issues.append((list(path), f"expected string to have <={max_len} characters"))
        if pattern is not None and not pattern.fullmatch(v):
            issues.append((list(path), "does not match its pattern"))
        if no_nul and "\u0000" in v:
            issues.append((list(path), "must not contain a NUL character"))
        return v if len(issues) == before else _Absent

    return check


def _integer(minimum: Optional[int] = None) -> Check:
    def check(v: Any, path: List[Union[str, int]], issues: List[Tuple[List[Union[str, int]], str]]) -> Any:
        # bool is an int in Python, never a number in JSON's sense.
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            issues.append((list(path), "expected number"))
            return _Absent
        if isinstance(v, float) and not v.is_integer():
            issues.append((list(path), "expected int"))
            return _Absent
        n = int(v)
        if abs(n) > MAX_SAFE_INTEGER:
            issues.append((list(path), "expected int"))
            return _Absent
        if minimum is not None and n < minimum:
            issues.append((list(path), f"expected number to be >={minimum}"))
            return _Absent
        return n

    return check


def _boolean() -> Check:
    def check(v: Any, path: List[Union[str, int]], issues: List[Tuple[List[Union[str, int]], str]]) -> Any:
        if isinstance(v, bool):
            return v
        issues.append((list(path), "expected boolean"))
        return _Absent

    return check


def _literal(value: Union[str, int]) -> Check:
    def check(v: Any, path: List[Union[str, int]], issues: List[Tuple[List[Union[str, int]], str]]) -> Any:
        if v == value and type(v) is type(value):
            return v
        issues.append((list(path), f"expected {json.dumps(value)}"))
        return _Absent

    return check


def _one_of(values: Sequence[str]) -> Check:
    def check(v: Any, path: List[Union[str, int]], issues: List[Tuple[List[Union[str, int]], str]]) -> Any:
        if isinstance(v, str) and v in values:
            return v
        issues.append((list(path), f"expected one of {'|'.join(json.dumps(x) for x in values)}"))
        return _Absent

    return check


def _array(item: Check, max_items: Optional[int] = None) -> Check:
    def check(v: Any, path: List[Union[str, int]], issues: List[Tuple[List[Union[str, int]], str]]) -> Any:
        if not isinstance(v, list):
            issues.append((list(path), "expected array"))
            return _Absent
        if max_items is not None and len(v) > max_items:
            issues.append((list(path), f"expected array to have <={max_items} items"))
            return _Absent
        before = len(issues)
        out = [item(x, [*path, i], issues) for i, x in enumerate(v)]
        return out if len(issues) == before else _Absent

    return check


@dataclass(frozen=True)
class _Field:
    check: Check
    # "required", "optional" (absent allowed) or "nullish" (absent or null allowed)
    presence: str = "required"


def _object(shape: Mapping[str, _Field]) -> Check:
    def check(v: Any, path: List[Union[str, int]], issues: List[Tuple[List[Union[str, int]], str]]) -> Any:
        if not isinstance(v, dict):
            issues.append((list(path), "expected object"))
            return _Absent
        before = len(issues)
        out: Dict[str, Any] = {}
        for key, f in shape.items():
            if key not in v:
                if f.presence == "required":
                    issues.append(([*path, key], "required"))
                continue
            raw = v[key]
            if raw is None and f.presence == "nullish":
                out[key] = None
                continue
            value = f.check(raw, [*path, key], issues)
            if value is not _Absent:
                out[key] = value
        return out if len(issues) == before else _Absent

    return check


class Parser:
    """A contract parser: unknown fields dropped, a wrong or missing field refused with its path."""

    def __init__(self, check: Check) -> None:
        self._check = check

    def safe_parse(self, value: Any) -> Tuple[bool, Any]:
        issues: List[Tuple[List[Union[str, int]], str]] = []
        out = self._check(value, [], issues)
        if issues or out is _Absent:
            return False, ContractParseError(issues or [([], "invalid")])
        return True, out

    def parse(self, value: Any) -> Any:
        ok, out = self.safe_parse(value)
        if not ok:
            raise out
        return out


def _pg_text(max_len: int) -> Check:
    return _string(min_len=1, max_len=max_len, no_nul=True)


# RFC 3339 with Z or an offset, seconds required, a real date (leap days included): the TypeScript
# contract's ISO_DATETIME. ASCII only: Python's \d would also take other scripts' digits.
ISO_DATETIME = re.compile(
    r"(?:(?:\d\d[2468][048]|\d\d[13579][26]|\d\d0[48]|[02468][048]00|[13579][26]00)-02-29|\d{4}-(?:(?:0[13578]|1[02])-"
    r"(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)|(?:02)-(?:0[1-9]|1\d|2[0-8])))T(?:(?:[01]\d|2[0-3]):"
    r"[0-5]\d:[0-5]\d(?:\.\d+)?(?:Z|([+-](?:[01]\d|2[0-3]):[0-5]\d)))",
    re.ASCII,
)

# ---------------------------------------------------------------------------------------------- liveness lock


def ident(name: str) -> str:
    """Quotes a schema name already validated as an identifier."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", name, re.ASCII):
        raise ValueError(f"not an identifier: {name}")
    return f'"{name}"'


def liveness_key_sql(app: str, executor: str) -> str:
    """The liveness lock's bigint key over two SQL expressions, computed by Postgres on every side."""
    return f"hashtextextended('afterlife-liveness:' || length({app}) || ':' || {app} || ':' || {executor}, 0)"


def take_liveness_sql(afterlife_schema: str) -> str:
    """Try the lock and record this session as its holder for this incarnation, in one statement.

    Parameters: app, executor ID, incarnation (``%s`` placeholders, psycopg's style; the text is otherwise the
    TypeScript contract's, ``$1``..``$3``).
    """
    return f"""WITH l AS (SELECT pg_try_advisory_lock({liveness_key_sql('$1::text', '$2::text')}) AS ok),
               me AS (SELECT usesysid, backend_start FROM pg_stat_get_activity(pg_backend_pid())),
               r AS (UPDATE {ident(afterlife_schema)}.executors
                        SET liveness_pid = pg_backend_pid(), liveness_usesysid = (SELECT usesysid FROM me),
                            liveness_backend_start = (SELECT backend_start FROM me)
                      WHERE application_name = $1 AND executor_id = $2 AND incarnation = $3::text AND (SELECT ok FROM l)
                      RETURNING 1)
          SELECT (SELECT ok FROM l) AS ok, EXISTS (SELECT 1 FROM r) AS recorded"""


def fence_check_sql(afterlife_schema: str) -> str:
    """The fence question: ``$1`` app, ``$2`` executor ID, ``$3`` since (timestamptz), ``$4`` incarnation."""
    s = ident(afterlife_schema)
    return f"""SELECT CASE
              WHEN $4::text IS NOT NULL AND x.incarnation IS NOT NULL AND x.incarnation <> $4
                THEN json_build_object('verdict', 'superseded', 'incarnation', x.incarnation, 'at', x.state_changed_at)
              WHEN x.state = 'dead'
                THEN json_build_object('verdict', 'dead', 'reason', x.reason, 'detectedBy', x.detected_by, 'at', x.state_changed_at)
              WHEN m.recovered_by IS NOT NULL
                THEN json_build_object('verdict', 'moved', 'reason', m.reason, 'detectedBy', m.recovered_by, 'at', m.started_at, 'moved', m.moved)
            END AS fence
       FROM (SELECT 1) AS one
       LEFT JOIN {s}.executors x ON x.application_name = $1 AND x.executor_id = $2
       LEFT JOIN LATERAL (
         SELECT r.reason, r.recovered_by, r.started_at, sum(cardinality(b.workflow_ids))::int AS moved
           FROM {s}.recoveries r JOIN {s}.recovery_batches b ON b.recovery_id = r.id
          WHERE r.application_name = $1 AND r.executor_id = $2 AND r.started_at >= $3 AND cardinality(b.workflow_ids) > 0
            -- A recovery about another incarnation of the ID (an earlier process, superseded or dead) moved
            -- that one's work, not this process's: it fences nobody here.
            AND ($4::text IS NULL OR r.incarnation IS NULL OR r.incarnation = $4)
          GROUP BY r.id ORDER BY r.started_at LIMIT 1
       ) m ON true"""


def positional(sql: str) -> str:
    """The contract's ``$n`` placeholders as psycopg's ``%(pn)s`` (and literal ``%`` escaped)."""
    return re.sub(r"\$(\d+)", r"%(p\1)s", sql.replace("%", "%%"))


def liveness_session_name(executor_id: str, incarnation: Optional[str]) -> str:
    """``afterlife_live_<executorId>@<incarnation>``, the ID cut so the whole fits 63 characters."""
    tail = f"@{incarnation}" if incarnation else ""
    room = 63 - len("afterlife_live_") - len(tail)
    return f"afterlife_live_{_js_slice(executor_id, room)}{tail}"


def _js_slice(s: str, n: int) -> str:
    """``s.slice(0, n)`` in UTF-16 code units (a cut astral character is dropped whole)."""
    if utf16_len(s) <= n:
        return s
    out, used = [], 0
    for ch in s:
        w = 2 if ord(ch) > 0xFFFF else 1
        if used + w > n:
            break
        out.append(ch)
        used += w
    return "".join(out)


# ---------------------------------------------------------------------------------------------------- lease

DEFAULT_LIVENESS_LEASE_MS = 8_000
MIN_LIVENESS_LEASE_MS = 3_000
MAX_LIVENESS_LEASE_MS = 300_000
# How often the kit speaks on its liveness session (what renews the lease), and how often, when no NOTIFY
# hinted it, that word is the fence question rather than an empty query (contract/lease.ts gives the why).
LIVENESS_RENEW_EVERY_MS = 1_000
LIVENESS_FENCE_EVERY_MS = 4_000


def effective_lease(configured_ms: int, inherited_ms: int) -> Tuple[int, str]:
    """The lease a session ends up with, and what became of the inherited one (``none|kept|longer|unsafe``)."""
    if inherited_ms <= 0:
        return configured_ms, "none"
    if inherited_ms >= configured_ms:
        return configured_ms, "none" if inherited_ms == configured_ms else "longer"
    if inherited_ms < MIN_LIVENESS_LEASE_MS:
        return configured_ms, "unsafe"
    return inherited_ms, "kept"


# -------------------------------------------------------------------------------------------------- heartbeat

HEARTBEAT_BOUNDS = {
    "maxBeatEveryMs": 60_000,
    "maxTtlMs": 600_000,
    "maxClockSkewMs": 60_000,
    "maxValueBytes": 4_096,
    "maxReadBytes": 4 * 1024 * 1024,
}

KEY_PREFIX_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}", re.ASCII)


def heartbeat_key(application_name: str, executor_id: str, prefix: str = "afterlife") -> str:
    return f"{prefix}:{application_name}:hb:{executor_id}"


def heartbeat_index_key(application_name: str, prefix: str = "afterlife") -> str:
    return f"{prefix}:{application_name}:hbidx"


def index_marker_key(application_name: str, prefix: str = "afterlife") -> str:
    return f"{heartbeat_index_key(application_name, prefix)}:on"


_NOW_MS_LUA = "local t = redis.call('TIME'); local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)"
_MAX_AHEAD_MS = HEARTBEAT_BOUNDS["maxTtlMs"]
_PRUNE_LUA = (
    "redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. now)\n"
    f"redis.call('ZREMRANGEBYSCORE', KEYS[2], '(' .. (now + {_MAX_AHEAD_MS}), '+inf')"
)
# KEYS: heartbeat key, index, marker. ARGV: value, TTL ms, executor ID. One script: the key and its index
# entry are written together, scored by Redis's own clock.
WRITE_HEARTBEAT_LUA = f"""{_NOW_MS_LUA}
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[3])
{_PRUNE_LUA}
redis.call('SET', KEYS[3], '1')
return 1"""

HEARTBEAT_STATES = ("alive", "draining", "drained")

HeartbeatValue = Parser(
    _object(
        {
            "executorId": _Field(_string()),
            "applicationName": _Field(_string()),
            "applicationVersion": _Field(_string()),
            "state": _Field(_one_of(HEARTBEAT_STATES)),
            "startedAt": _Field(_string()),
            "beatAt": _Field(_string()),
            "inFlight": _Field(_integer(0)),
            "beatEveryMs": _Field(_integer(1), "optional"),
            "ttlMs": _Field(_integer(1), "optional"),
        }
    )
)

# ---------------------------------------------------------------------------------------------------- settings

INT_SETTINGS: Dict[str, Tuple[int, int, int, str, Optional[str], Optional[str]]] = {
    # name: (min, max, default, unit, why below min, why above max)
    "HEARTBEAT_TTL_MS": (500, HEARTBEAT_BOUNDS["maxTtlMs"], 15_000, "ms", None,
                         "the reaper reads a longer TTL as not written by a kit"),
    "HEARTBEAT_INTERVAL_MS": (50, HEARTBEAT_BOUNDS["maxBeatEveryMs"], 250, "ms", None,
                              "the reaper reads a beat as stale after two of its own largest intervals"),
    "AFTERLIFE_LIVENESS_LEASE_MS": (MIN_LIVENESS_LEASE_MS, MAX_LIVENESS_LEASE_MS, DEFAULT_LIVENESS_LEASE_MS, "ms",
                                    "the lease is renewed once a second; a shorter lease ends live sessions",
                                    "longer leaves a lost host's work stranded for minutes"),
}

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}", re.ASCII)
TEXT_SETTINGS: Dict[str, Tuple[Callable[[str], bool], str]] = {
    "DBOS_SYSTEM_SCHEMA": (lambda v: bool(_IDENTIFIER.fullmatch(v)),
                           "must be a SQL identifier (letters, digits, underscore; max 63)"),
    "AFTERLIFE_SCHEMA": (lambda v: bool(_IDENTIFIER.fullmatch(v)),
                         "must be a SQL identifier (letters, digits, underscore; max 63)"),
    "REDIS_URL": (lambda v: bool(re.match(r"rediss?://[^\s]", v)), "must be a redis:// or rediss:// URL"),
    "REDIS_KEY_PREFIX": (lambda v: bool(KEY_PREFIX_RE.fullmatch(v)),
                         'must be 1-64 letters, digits, "_", "." or "-" (it is part of every Redis key)'),
    "REDIS_CA_CERT": (lambda v: bool(re.search(r"-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----", v)),
                      "must hold PEM certificates (-----BEGIN CERTIFICATE-----)"),
    "GOOGLE_CLOUD_PROJECT": (lambda v: len(v) > 0 and v.strip() == v, "must be a non-empty name"),
    "EXECUTOR_DEATH_TOPIC": (lambda v: len(v) > 0 and v.strip() == v, "must be a non-empty name"),
}

_PLAIN_DECIMAL = re.compile(r"0|[1-9][0-9]{0,15}", re.ASCII)
PLAIN_DECIMAL_MESSAGE = "must be a plain decimal integer"
MAX_TIMER_MS = 2_147_483_647


def _bound(name_bounds: Tuple[int, int, int, str, Optional[str], Optional[str]], n: int) -> Optional[str]:
    lo, hi, _default, unit, below, above = name_bounds
    u = f" {unit}" if unit else ""
    if n < lo:
        return f"must be at least {lo}{u}" + (f" ({below})" if below else "")
    if n > hi:
        return f"must be at most {hi}{u}" + (f" ({above})" if above else "")
    return None


def parse_setting(name: str, raw: str) -> Tuple[bool, Union[int, str]]:
    """One shared setting's raw text: ``(True, value)`` or ``(False, the message both kits refuse it with)``."""
    if name in TEXT_SETTINGS:
        ok_fn, message = TEXT_SETTINGS[name]
        return (True, raw) if ok_fn(raw) else (False, message)
    bounds = INT_SETTINGS[name]
    if not _PLAIN_DECIMAL.fullmatch(raw):
        return False, PLAIN_DECIMAL_MESSAGE
    problem = _bound(bounds, int(raw))
    return (False, problem) if problem else (True, int(raw))


def parse_duration_ms(raw: str, minimum: int) -> Tuple[bool, Union[int, str]]:
    """A duration only the kit reads: plain decimal, at least ``minimum``, at most a timer's reach."""
    if not _PLAIN_DECIMAL.fullmatch(raw):
        return False, PLAIN_DECIMAL_MESSAGE
    problem = _bound((minimum, MAX_TIMER_MS, minimum, "ms", None, None), int(raw))
    return (False, problem) if problem else (True, int(raw))


# ----------------------------------------------------------------------------------------------- death notice

DeathReason = Literal["sigterm", "drained", "heartbeat-lapsed", "manual"]
DEATH_REASONS: Tuple[str, ...] = ("sigterm", "drained", "heartbeat-lapsed", "manual")
EXECUTOR_DEATH_TOPIC = "executor-deaths"

DeathNotice = Parser(
    _object(
        {
            "type": _Field(_literal("executor.dead")),
            "version": _Field(_literal(1)),
            "executorId": _Field(_pg_text(512)),
            "applicationName": _Field(_pg_text(512)),
            "applicationVersions": _Field(_array(_pg_text(512), 1_000), "optional"),
            "reason": _Field(_one_of(DEATH_REASONS)),
            "detectedAt": _Field(_string(pattern=ISO_DATETIME)),
            "detectedBy": _Field(_pg_text(512)),
            "force": _Field(_boolean(), "optional"),
            "evidence": _Field(_one_of(("liveness", "heartbeat", "sessions")), "optional"),
            "staleBeatAt": _Field(_string(pattern=ISO_DATETIME), "optional"),
            "incarnation": _Field(_pg_text(64), "optional"),
        }
    )
)


def death_notice_attributes(notice: Mapping[str, Any]) -> Dict[str, str]:
    """Pub/Sub attributes of a notice (its ordering key is the executor ID)."""
    return {"type": str(notice["type"]), "executorId": str(notice["executorId"])}


# ------------------------------------------------------------------------------------------------------ fence

FENCED_EXIT_CODE = 75
FenceVerdict = Literal["dead", "moved", "superseded"]

Fence = Parser(
    _object(
        {
            "verdict": _Field(_one_of(("dead", "moved", "superseded"))),
            "reason": _Field(_string(), "nullish"),
            "detectedBy": _Field(_string(), "nullish"),
            "incarnation": _Field(_string(), "nullish"),
            "at": _Field(_string(), "nullish"),
            "moved": _Field(_integer(), "nullish"),
        }
    )
)


def fence_channel(afterlife_schema: str) -> str:
    return f"{afterlife_schema}_fence"[:63]


def requeued_channel(afterlife_schema: str) -> str:
    return f"{afterlife_schema}_requeued"[:63]


def drain_channel(afterlife_schema: str) -> str:
    """Where a drain request is announced (``{"applicationName": …}``): a hint to poll now, never the request."""
    return f"{afterlife_schema}_drain"[:63]


# --------------------------------------------------------------------------------------------------- requeued

REQUEUED_NUDGE_TARGETS = 2
REQUEUED_MAX_QUEUES = 20

RequeuedNotice = Parser(
    _object(
        {
            "applicationName": _Field(_string(min_len=1)),
            "applicationVersion": _Field(_string(), "nullish"),
            "queues": _Field(_array(_string(min_len=1), REQUEUED_MAX_QUEUES)),
            "to": _Field(_array(_string(min_len=1), REQUEUED_NUDGE_TARGETS)),
        }
    )
)

# ------------------------------------------------------------------------------------------------------ guard

REAPER_LEASE_PREFIX = "reaper:"
GUARD_TICK_WITHIN_MS = 120_000
