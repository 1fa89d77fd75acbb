"""The kit's log: the standard ``logging`` module, one JSON object a line when the app configured nothing.

Every line carries the executor's identity and, where it matters, an ``event`` an operator (or a test) can
search for — the same event names as the TypeScript kit (``executor_fenced``, ``kit_unwatched``, ...).
Cloud Run reads ``severity`` and ``message`` from a JSON line on stderr.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, Dict, Mapping, Optional

LOGGER_NAME = "afterlife_executor"
NOTICE = 25
logging.addLevelName(NOTICE, "NOTICE")

_SEVERITY = {logging.DEBUG: "DEBUG", logging.INFO: "INFO", NOTICE: "NOTICE", logging.WARNING: "WARNING",
             logging.ERROR: "ERROR", logging.CRITICAL: "CRITICAL"}


class JsonFormatter(logging.Formatter):
    """``{"severity", "message", "time", "component", ...fields}``, one line."""

    def format(self, record: logging.LogRecord) -> str:
        out: Dict[str, Any] = {
            "severity": _SEVERITY.get(record.levelno, record.levelname),
            "message": record.getMessage(),
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "component": "afterlife-executor",
        }
        fields = getattr(record, "afterlife", None)
        if isinstance(fields, dict):
            out.update(fields)
        if record.exc_info:
            out["err"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


def _default_logger() -> logging.Logger:
    log = logging.getLogger(LOGGER_NAME)
    # Only when nobody configured logging: an app's own handlers (or DBOS's) win.
    if not log.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter())
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False
    return log


class KitLog:
    """A logger with bound fields (executor ID, application, incarnation)."""

    def __init__(self, logger: Optional[logging.Logger] = None, fields: Optional[Mapping[str, Any]] = None) -> None:
        self.logger = logger or _default_logger()
        self.fields: Dict[str, Any] = dict(fields or {})

    def child(self, **fields: Any) -> "KitLog":
        return KitLog(self.logger, {**self.fields, **fields})

    def _log(self, level: int, message: str, fields: Mapping[str, Any]) -> None:
        err = fields.get("err")
        merged = {**self.fields, **{k: v for k, v in fields.items() if v is not None}}
        if isinstance(err, BaseException):
            merged["err"] = f"{type(err).__name__}: {err}"
        self.logger.log(level, message, extra={"afterlife": merged})

    def debug(self, message: str, **fields: Any) -> None:
        self._log(logging.DEBUG, message, fields)

    def info(self, message: str, **fields: Any) -> None:
        self._log(logging.INFO, message, fields)

    def notice(self, message: str, **fields: Any) -> None:
        self._log(NOTICE, message, fields)

    def warn(self, message: str, **fields: Any) -> None:
        self._log(logging.WARNING, message, fields)

    def error(self, message: str, **fields: Any) -> None:
        self._log(logging.ERROR, message, fields)

    def flush(self) -> None:
        for h in self.logger.handlers:
            try:
                h.flush()
            except Exception:
                pass
        try:
            sys.stderr.flush()
            sys.stdout.flush()
        except Exception:
            pass


class Throttle:
    """One line per key a minute: a kit that cannot reach its database says so without flooding the log."""

    def __init__(self, log: KitLog, window_s: float = 60.0) -> None:
        self.log = log
        self.window_s = window_s
        self._last: Dict[str, float] = {}
        self._suppressed: Dict[str, int] = {}

    def report(self, key: str, err: BaseException, **fields: Any) -> None:
        now = time.monotonic()
        last = self._last.get(key)
        if last is not None and now - last < self.window_s:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return
        self._last[key] = now
        held = self._suppressed.pop(key, 0)
        self.log.warn(f"{key} failed; retrying", err=err, suppressed=held or None, event="kit_trouble", **fields)

    def ok(self, key: str) -> None:
        if self._last.pop(key, None) is not None:
            self.log.info(f"{key} works again", event="kit_trouble_over")
