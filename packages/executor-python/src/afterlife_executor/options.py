"""The kit's options: explicit keyword arguments, then the environment, then what DBOS was launched with.

The same variables as the TypeScript kit (``packages/executor/src/runtime/env.ts``), parsed with the
contract's rules (``contract.parse_setting``): a value one kit accepts and the other refuses is how a live
executor ends up judged by a beat the reaper reads as stale. Every problem is reported at once.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, fields, replace
from typing import Callable, Dict, List, Mapping, Optional, Tuple, Union

from .contract import INT_SETTINGS, TEXT_SETTINGS, parse_duration_ms, parse_setting


class ConfigError(ValueError):
    """A configuration the kit refuses, every problem named (``NAME: message``)."""

    def __init__(self, problems: List[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


Reader = Callable[[str], Tuple[bool, Union[int, str]]]


def _matching(pattern: str, message: str) -> Reader:
    rx = re.compile(pattern, re.ASCII)
    return lambda raw: (True, raw) if rx.fullmatch(raw) else (False, message)


def _one_of(*values: str) -> Reader:
    return lambda raw: (True, raw) if raw in values else (False, f"must be one of {', '.join(values)}")


def _duration(minimum: int) -> Reader:
    return lambda raw: parse_duration_ms(raw, minimum)


def _shared(name: str) -> Reader:
    return lambda raw: parse_setting(name, raw)


_POSTGRES_URL = _matching(r"postgres(ql)?(\+[a-z0-9_]+)?://.*", "must be a postgres:// URL")

KIT_ONLY: Dict[str, Reader] = {
    "AFTERLIFE_DATABASE_URL": _POSTGRES_URL,
    "DBOS_SYSTEM_DATABASE_URL": _POSTGRES_URL,
    "AFTERLIFE_LIVENESS": _one_of("on", "off"),
    "AFTERLIFE_LIVENESS_DATABASE_URL": _POSTGRES_URL,
    "AFTERLIFE_PUBSUB_ENDPOINT": _matching(r"https?://[^/\s]+/?", "must be an http(s):// origin"),
    "AFTERLIFE_PUBLISH": _one_of("pubsub", "none"),
    "AFTERLIFE_SHUTDOWN_GRACE_MS": _duration(1_000),
    "AFTERLIFE_SHUTDOWN_MARGIN_MS": _duration(0),
    "AFTERLIFE_EXIT_AFTER_DRAIN": _one_of("true", "false"),
    "AFTERLIFE_ALLOW_LOCAL_EXECUTOR_ID": _one_of("true", "false"),
    "AFTERLIFE_ATTACH_FATAL": _one_of("true", "false"),
}
PUBLISH_PATH: Dict[str, Reader] = {
    "PUBSUB_BRIDGE_URL": _matching(r"https?://[^\s]+", "must be an http(s):// URL"),
    "PUBSUB_EMULATOR_HOST": _matching(r"[A-Za-z0-9.\[\]:-]+:\d{1,5}", "must be host:port"),
    "GCLOUD_PROJECT": _shared("GOOGLE_CLOUD_PROJECT"),
    "GCE_METADATA_HOST": _matching(r"[A-Za-z0-9.-]+(:\d{1,5})?", "must be host[:port]"),
}
READERS: Dict[str, Reader] = {
    **KIT_ONLY,
    **{name: _shared(name) for name in [*TEXT_SETTINGS.keys(), *INT_SETTINGS.keys()]},
    **PUBLISH_PATH,
}
KIT_ENV_KEYS: Tuple[str, ...] = tuple(READERS.keys())


def read_variables(env: Mapping[str, str]) -> Dict[str, Union[int, str]]:
    """Every variable the kit reads, parsed; an empty one is unset (as shells and Terraform spell it)."""
    out: Dict[str, Union[int, str]] = {}
    problems: List[str] = []
    for key, read in READERS.items():
        raw = env.get(key)
        if raw is None or raw == "":
            continue
        ok, value = read(raw)
        if ok:
            out[key] = value
        else:
            problems.append(f"{key}: {value}")
    ca, url = out.get("REDIS_CA_CERT"), out.get("REDIS_URL")
    if ca is not None and url is None:
        problems.append("REDIS_CA_CERT: is set but REDIS_URL is not")
    elif ca is not None and not str(url).startswith("rediss://"):
        problems.append("REDIS_CA_CERT: is set but REDIS_URL is not a rediss:// (TLS) URL")
    if problems:
        raise ConfigError(problems)
    return out


@dataclass(frozen=True)
class KitOptions:
    """What the kit runs with, once explicit arguments, the environment and DBOS's configuration are merged."""

    database_url: str
    application_name: str
    dbos_schema: str = "dbos"
    afterlife_schema: str = "afterlife"
    redis_url: Optional[str] = None
    redis_tls_ca: Optional[str] = None
    key_prefix: str = "afterlife"
    heartbeat_ttl_ms: int = 15_000
    heartbeat_interval_ms: int = 250
    liveness: bool = True
    liveness_lease_ms: int = 8_000
    liveness_database_url: Optional[str] = None
    publisher: str = "pubsub"
    project: Optional[str] = None
    pubsub_endpoint: Optional[str] = None
    topic: str = "executor-deaths"
    publish_timeout_ms: int = 1_000
    allow_local_executor_id: bool = False
    shutdown_grace_ms: int = 10_000
    shutdown_margin_ms: int = 2_000
    handover_reserve_ms: int = 1_500
    handle_signals: bool = True
    exit_after_planned_drain: bool = False
    fatal: bool = True
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))


OPTION_ENV: Dict[str, str] = {
    "dbos_schema": "DBOS_SYSTEM_SCHEMA",
    "afterlife_schema": "AFTERLIFE_SCHEMA",
    "redis_url": "REDIS_URL",
    "redis_tls_ca": "REDIS_CA_CERT",
    "key_prefix": "REDIS_KEY_PREFIX",
    "heartbeat_ttl_ms": "HEARTBEAT_TTL_MS",
    "heartbeat_interval_ms": "HEARTBEAT_INTERVAL_MS",
    "liveness_lease_ms": "AFTERLIFE_LIVENESS_LEASE_MS",
    "liveness_database_url": "AFTERLIFE_LIVENESS_DATABASE_URL",
    "publisher": "AFTERLIFE_PUBLISH",
    "project": "GOOGLE_CLOUD_PROJECT",
    "pubsub_endpoint": "AFTERLIFE_PUBSUB_ENDPOINT",
    "topic": "EXECUTOR_DEATH_TOPIC",
    "shutdown_grace_ms": "AFTERLIFE_SHUTDOWN_GRACE_MS",
    "shutdown_margin_ms": "AFTERLIFE_SHUTDOWN_MARGIN_MS",
}
FLAG_ENV: Dict[str, str] = {
    "exit_after_planned_drain": "AFTERLIFE_EXIT_AFTER_DRAIN",
    "allow_local_executor_id": "AFTERLIFE_ALLOW_LOCAL_EXECUTOR_ID",
    "fatal": "AFTERLIFE_ATTACH_FATAL",
}


def resolve_options(*, dbos_url: Optional[str], dbos_schema: Optional[str], dbos_app_name: Optional[str],
                    explicit: Mapping[str, object], env: Mapping[str, str]) -> Tuple[KitOptions, str]:
    """The options and where the database URL came from (for the attach line).

    Precedence: explicit arguments, then the environment, then DBOS — except DBOS_SYSTEM_DATABASE_URL, which
    stands in only when DBOS's own URL cannot be read (the URL DBOS actually uses is the better answer).
    """
    e = read_variables(env)
    problems: List[str] = []
    if explicit.get("database_url"):
        database_url, source = str(explicit["database_url"]), "options"
    elif "AFTERLIFE_DATABASE_URL" in e:
        database_url, source = str(e["AFTERLIFE_DATABASE_URL"]), "AFTERLIFE_DATABASE_URL"
    elif dbos_url:
        database_url, source = dbos_url, "dbos-config"
    elif "DBOS_SYSTEM_DATABASE_URL" in e:
        database_url, source = str(e["DBOS_SYSTEM_DATABASE_URL"]), "DBOS_SYSTEM_DATABASE_URL"
    else:
        database_url, source = "", "none"
        problems.append("database_url: DBOS's launched configuration could not be read: set AFTERLIFE_DATABASE_URL "
                        "or DBOS_SYSTEM_DATABASE_URL (or pass database_url)")
    app = explicit.get("application_name") or dbos_app_name
    if not app:
        problems.append("application_name: DBOS's application name could not be read: pass application_name")
    values: Dict[str, object] = {}
    for opt, var in OPTION_ENV.items():
        if var in e:
            values[opt] = e[var]
    if "dbos_schema" not in values and dbos_schema:
        values["dbos_schema"] = dbos_schema
    for opt, var in FLAG_ENV.items():
        if var in e:
            values[opt] = e[var] == "true"
    if "AFTERLIFE_LIVENESS" in e:
        values["liveness"] = e["AFTERLIFE_LIVENESS"] == "on"
    known = {f.name for f in fields(KitOptions)}
    for k, v in explicit.items():
        if v is None or k in ("database_url", "application_name"):
            continue
        if k not in known:
            problems.append(f"{k}: not an option of attach_executor")
            continue
        values[k] = v
    # Programmatic values meet the bounds their variables have, so neither path can set what the plane misreads.
    for opt, var in (("heartbeat_ttl_ms", "HEARTBEAT_TTL_MS"), ("heartbeat_interval_ms", "HEARTBEAT_INTERVAL_MS"),
                     ("liveness_lease_ms", "AFTERLIFE_LIVENESS_LEASE_MS")):
        if opt in explicit and explicit[opt] is not None:
            ok, msg = parse_setting(var, str(explicit[opt]))
            if not ok:
                problems.append(f"{opt}: {msg}")
    for opt, var in (("key_prefix", "REDIS_KEY_PREFIX"), ("afterlife_schema", "AFTERLIFE_SCHEMA"),
                     ("dbos_schema", "DBOS_SYSTEM_SCHEMA")):
        if opt in explicit and explicit[opt] is not None:
            ok, msg = parse_setting(var, str(explicit[opt]))
            if not ok:
                problems.append(f"{opt}: {msg}")
    if problems:
        raise ConfigError(problems)
    opts = KitOptions(database_url=database_url, application_name=str(app), env=dict(env))
    return replace(opts, **values), source  # type: ignore[arg-type]
