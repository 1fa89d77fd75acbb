"""The kit's options: the same variables and refusals as the TypeScript kit, explicit arguments first."""

from __future__ import annotations

import pytest

from afterlife_executor.dbos_bridge import _plain_postgres_url
from afterlife_executor.options import KIT_ENV_KEYS, ConfigError, read_variables, resolve_options

DBOS_URL = "postgresql://postgres@127.0.0.1:5432/app_dbos_sys"


def _resolve(env: dict, **explicit: object):
    return resolve_options(dbos_url=DBOS_URL, dbos_schema="dbos", dbos_app_name="agents", explicit=explicit, env=env)


def test_reads_what_dbos_was_launched_with_when_nothing_is_set() -> None:
    o, source = _resolve({})
    assert (o.database_url, o.application_name, o.dbos_schema, source) == (DBOS_URL, "agents", "dbos", "dbos-config")
    assert (o.heartbeat_interval_ms, o.heartbeat_ttl_ms, o.liveness_lease_ms, o.liveness) == (250, 15_000, 8_000, True)
    assert (o.shutdown_grace_ms, o.shutdown_margin_ms, o.topic, o.publisher) == (10_000, 2_000, "executor-deaths", "pubsub")


def test_precedence_explicit_then_env_then_dbos() -> None:
    env = {"AFTERLIFE_DATABASE_URL": "postgres://h/afterlife", "HEARTBEAT_INTERVAL_MS": "500", "REDIS_URL": "redis://r:6379"}
    o, source = _resolve(env)
    assert (o.database_url, source, o.heartbeat_interval_ms, o.redis_url) == ("postgres://h/afterlife",
                                                                               "AFTERLIFE_DATABASE_URL", 500, "redis://r:6379")
    o, source = _resolve(env, database_url="postgres://h/explicit", heartbeat_interval_ms=1000)
    assert (o.database_url, source, o.heartbeat_interval_ms) == ("postgres://h/explicit", "options", 1000)
    # DBOS_SYSTEM_DATABASE_URL only stands in when DBOS's own URL cannot be read.
    o, source = _resolve({"DBOS_SYSTEM_DATABASE_URL": "postgres://h/other"})
    assert source == "dbos-config"
    o, source = resolve_options(dbos_url=None, dbos_schema=None, dbos_app_name="a", explicit={},
                                env={"DBOS_SYSTEM_DATABASE_URL": "postgres://h/other"})
    assert (o.database_url, source) == ("postgres://h/other", "DBOS_SYSTEM_DATABASE_URL")


def test_every_problem_at_once_with_the_contracts_words() -> None:
    with pytest.raises(ConfigError) as e:
        _resolve({"HEARTBEAT_TTL_MS": "1e3", "AFTERLIFE_LIVENESS_LEASE_MS": "2999", "REDIS_KEY_PREFIX": "a:b",
                  "AFTERLIFE_LIVENESS": "maybe"})
    assert e.value.problems == [
        "AFTERLIFE_LIVENESS: must be one of on, off",
        'REDIS_KEY_PREFIX: must be 1-64 letters, digits, "_", "." or "-" (it is part of every Redis key)',
        "HEARTBEAT_TTL_MS: must be a plain decimal integer",
        "AFTERLIFE_LIVENESS_LEASE_MS: must be at least 3000 ms (the lease is renewed once a second; a shorter lease "
        "ends live sessions)",
    ]
    with pytest.raises(ConfigError) as e:
        _resolve({}, heartbeat_interval_ms=70_000, liveness_lease_ms=1)
    assert [p.split(":")[0] for p in e.value.problems] == ["heartbeat_interval_ms", "liveness_lease_ms"]
    with pytest.raises(ConfigError):
        _resolve({}, no_such_option=1)


def test_a_ca_without_tls_is_refused() -> None:
    pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"
    with pytest.raises(ConfigError, match="REDIS_CA_CERT: is set but REDIS_URL is not a rediss://"):
        read_variables({"REDIS_URL": "redis://r:6379", "REDIS_CA_CERT": pem})
    assert read_variables({"REDIS_URL": "rediss://r:6378", "REDIS_CA_CERT": pem})["REDIS_CA_CERT"] == pem


def test_empty_is_unset_and_the_kit_reads_the_ts_kits_variables() -> None:
    assert read_variables({"REDIS_URL": "", "HEARTBEAT_TTL_MS": ""}) == {}
    for name in ("REDIS_URL", "HEARTBEAT_TTL_MS", "HEARTBEAT_INTERVAL_MS", "AFTERLIFE_LIVENESS_LEASE_MS",
                 "PUBSUB_EMULATOR_HOST", "GOOGLE_CLOUD_PROJECT", "EXECUTOR_DEATH_TOPIC", "AFTERLIFE_SHUTDOWN_GRACE_MS",
                 "AFTERLIFE_ALLOW_LOCAL_EXECUTOR_ID", "AFTERLIFE_ATTACH_FATAL", "AFTERLIFE_LIVENESS_DATABASE_URL"):
        assert name in KIT_ENV_KEYS


def test_sqlalchemy_urls_become_libpq_urls() -> None:
    assert _plain_postgres_url("postgresql+psycopg://u:p%40ss@h:5432/db?sslmode=require") == \
        "postgresql://u:p%40ss@h:5432/db?sslmode=require"
    assert _plain_postgres_url("postgres://u@h/db") == "postgresql://u@h/db"
    with pytest.raises(ValueError, match="not Postgres"):
        _plain_postgres_url("sqlite:///dbos.sqlite")
