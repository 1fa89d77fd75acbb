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
from .options import KIT_ENV_KEYS, ConfigError

__all__ = [
    "ATTACH_FAILED_EXIT_CODE",
    "CLOUD_RUN_GRACE_MS",
    "ConfigError",
    "ContractParseError",
    "ExecutorIdError",
    "ExecutorKit",
    "FENCED_EXIT_CODE",
    "KIT_ENV_KEYS",
    "__version__",
    "attach_executor",
]
