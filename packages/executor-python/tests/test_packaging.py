"""The package builds as Python libraries do: a wheel from pyproject.toml with the standard tools (pip's
PEP 517 front end over setuptools, offline), carrying the modules, py.typed and the LICENSE, with
ranges (not pins) for what a DBOS app already has plus the Redis client, and importable once installed."""

from __future__ import annotations

import email
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import List

import pytest

PROJECT = Path(__file__).resolve().parents[1]
PACKAGE = PROJECT / "src" / "afterlife_executor"
BUILD_TIMEOUT_SEC = 180


def _pip_or_skip() -> None:
    if importlib.util.find_spec("pip") is None:
        if os.environ.get("CI"):
            pytest.fail(f"pip is missing from {sys.executable}: CI must build the wheel")
        pytest.skip(f"SKIPPED LOUDLY: pip is missing from {sys.executable}; the wheel was not built")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _pip_or_skip()
    root = tmp_path_factory.mktemp("pkg")
    # Built from a copy: an in-tree setuptools build leaves build/ and *.egg-info in the checkout.
    src = root / "project"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(PROJECT / name, src / name)
    shutil.copytree(
        PROJECT / "src",
        src / "src",
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc"),
    )
    out = root / "dist"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--wheel-dir",
            str(out),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_SEC,
    )
    assert run.returncode == 0, f"pip wheel failed:\n{run.stdout}\n{run.stderr}"
    wheels = list(out.glob("afterlife_executor-*-py3-none-any.whl"))
    assert len(wheels) == 1, f"expected one pure-Python wheel, got {[w.name for w in out.iterdir()]}"
    return wheels[0]


def _names(wheel: Path) -> List[str]:
    with zipfile.ZipFile(wheel) as z:
        return z.namelist()


def test_the_wheel_carries_every_module_py_typed_and_the_license(wheel: Path) -> None:
    names = _names(wheel)
    modules = sorted(p.relative_to(PACKAGE.parent).as_posix() for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)
    for required in ("afterlife_executor/__init__.py", "afterlife_executor/repair.py", "afterlife_executor/limiter.py"):
        assert required in modules, f"{required} is missing from the source tree"
    missing = [m for m in [*modules, "afterlife_executor/py.typed"] if m not in names]
    assert missing == [], f"not in the wheel: {missing}"
    dist_info = [n for n in names if n.startswith("afterlife_executor-") and ".dist-info/" in n]
    licenses = [n for n in dist_info if n.rsplit("/", 1)[-1].startswith("LICENSE")]
    assert licenses, f"no LICENSE in {dist_info}"
    with zipfile.ZipFile(wheel) as z:
        assert "MIT License" in z.read(licenses[0]).decode()
    # Nothing but the package and its metadata: no tests, no build leftovers.
    assert all(n.startswith(("afterlife_executor/", "afterlife_executor-")) for n in names), names


def test_the_metadata_names_the_package_its_licence_and_ranges_not_pins(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        meta_name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        meta = email.message_from_bytes(z.read(meta_name))
    assert meta["Name"] == "afterlife-executor"
    assert meta["License"] == "MIT"
    assert meta["Requires-Python"] == ">=3.10"
    assert "Typing :: Typed" in (meta.get_all("Classifier") or [])
    requires = [r for r in (meta.get_all("Requires-Dist") or []) if "extra ==" not in r]
    # "dbos (<3,>=2.3)" from older setuptools, "dbos<3,>=2.3" from newer ones.
    by_name = {re.match(r"[A-Za-z0-9_.-]+", r).group(0): r for r in requires}  # type: ignore[union-attr]
    assert sorted(by_name) == ["dbos", "psycopg", "redis"], requires
    for r in requires:
        assert "==" not in r and "~=" not in r, f"pinned: {r}"
    assert ">=2.3" in by_name["dbos"] and "<3" in by_name["dbos"]
    assert ">=3.1" in by_name["psycopg"]
    assert ">=4.3" in by_name["redis"]
    assert "attach_executor" in (meta.get_payload() or ""), "the README (long description) is not in the metadata"


def test_the_installed_wheel_imports_and_is_typed(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    run = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(target), str(wheel)],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_SEC,
    )
    assert run.returncode == 0, run.stderr
    assert (target / "afterlife_executor" / "py.typed").is_file()
    # Only the installed copy on the path (plus DBOS's), never the checkout's src/.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    deps = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != (PROJECT / "src").resolve()]
    env["PYTHONPATH"] = os.pathsep.join([str(target), *deps])
    probe = (
        "import afterlife_executor, afterlife_executor.repair as r, afterlife_executor.limiter as l;"
        "print(afterlife_executor.__file__);"
        "print(r.get_result_with_repair.__name__, l.limit_calls.__name__);"
        "print(afterlife_executor.__version__)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    first, second, version = out.stdout.splitlines()[:3]
    assert first.startswith(str(target)), first
    assert second == "get_result_with_repair limit_calls"
    # The version the package reports (the plane compares kit versions) is the one the wheel was built as.
    assert wheel.name.split("-")[1] == version, (wheel.name, version)
