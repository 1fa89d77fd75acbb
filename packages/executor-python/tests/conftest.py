"""Shared test set-up: the package from its source tree, and the real Postgres the tests run against."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))


def database_url() -> str:
    return os.environ.get("AFTERLIFE_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


@pytest.fixture(scope="module")
def pg_conn() -> Iterator[Any]:
    import psycopg

    with psycopg.connect(database_url(), autocommit=True) as conn:
        yield conn
