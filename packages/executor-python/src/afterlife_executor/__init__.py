"""afterlife-executor for DBOS Transact for Python.

One call after ``DBOS.launch()``::

    from afterlife_executor import attach_executor

    DBOS.launch()
    kit = attach_executor()

A crash of this process is seen in about a second (the liveness lock on a session of the kit's own, the
heartbeat), a SIGTERM drains inside Cloud Run's grace and hands what cannot finish over at once (a death
notice), and a process declared dead, superseded or whose work was moved stops itself (exit 75).
"""

from ._version import __version__
from .contract import FENCED_EXIT_CODE, ContractParseError
from .kit import ATTACH_FAILED_EXIT_CODE, CLOUD_RUN_GRACE_MS, ExecutorIdError, ExecutorKit, attach_executor
from .limiter import CallBudgetExhaustedError, CallLimiter, CallLimiterMisuseError, limit_calls
from .options import KIT_ENV_KEYS, ConfigError
from .repair import (
    Divergence,
    ForkBudgetExhaustedError,
    ForkConflictError,
    ForkInfo,
    divergence_of,
    fork_id,
    get_result_with_auto_fork,
    get_result_with_repair,
    get_result_with_repair_async,
)

__all__ = [
    "ATTACH_FAILED_EXIT_CODE",
    "CLOUD_RUN_GRACE_MS",
    "CallBudgetExhaustedError",
    "CallLimiter",
    "CallLimiterMisuseError",
    "ConfigError",
    "ContractParseError",
    "Divergence",
    "ExecutorIdError",
    "ExecutorKit",
    "FENCED_EXIT_CODE",
    "ForkBudgetExhaustedError",
    "ForkConflictError",
    "ForkInfo",
    "KIT_ENV_KEYS",
    "__version__",
    "attach_executor",
    "divergence_of",
    "fork_id",
    "get_result_with_auto_fork",
    "get_result_with_repair",
    "get_result_with_repair_async",
    "limit_calls",
]
