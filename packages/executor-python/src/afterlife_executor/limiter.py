"""A limiter for outbound agent calls (LLM and tool APIs).

At most ``per_key`` calls per key and ``global_limit`` calls in total, waiting at most
``acquire_timeout_sec`` for a slot. Unbounded fan-out exhausts sockets, provider rate limits and pools for
everything sharing the process; a DBOS app that fans a queue's concurrency out into agent calls needs a cap
that holds across threads (DBOS runs each workflow in its own thread) and inside asyncio alike.

The semantics are the TypeScript kit's ``limitCalls``: waiters are served in arrival order, but a waiter
whose key is at its own cap is skipped rather than blocking the line, so one slow key never starves the
others of global slots. A call that times out waiting never starts, so retrying it later is safe.

The limiter holds no database connection: waiting happens in memory. It refuses to wait inside a DBOS
``@DBOS.transaction``, whose connection (and open transaction) would be held across the wait; call it from
a ``@DBOS.step`` or plain code.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from typing import (
    AsyncGenerator,
    Awaitable,
    Callable,
    Deque,
    Dict,
    Generator,
    Literal,
    Optional,
    TypeVar,
    Union,
)

__all__ = [
    "CallBudgetExhaustedError",
    "CallLimiter",
    "CallLimiterMisuseError",
    "limit_calls",
]

T = TypeVar("T")


class CallBudgetExhaustedError(Exception):
    """No slot became free within ``acquire_timeout_sec``; the call never started, so a retry is safe."""

    code = "call_budget_exhausted"
    disposition = "retry"

    def __init__(self, key: str, waited_sec: float, scope: Literal["key", "global"]) -> None:
        self.key = key
        self.waited_sec = waited_sec
        self.scope: Literal["key", "global"] = scope
        super().__init__(
            f'call limiter: no {scope} slot for key "{key}" within {waited_sec * 1000:.0f} ms'
        )


class CallLimiterMisuseError(RuntimeError):
    """The limiter was asked to wait where waiting would hold a database connection (a DBOS transaction)."""


class _Waiter:
    __slots__ = ("key", "granted", "event", "future", "loop")

    def __init__(
        self,
        key: str,
        event: Optional[threading.Event],
        future: Optional["asyncio.Future[None]"],
        loop: Optional[asyncio.AbstractEventLoop],
    ) -> None:
        self.key = key
        # Set under the limiter's lock when a slot is taken on this waiter's behalf: whoever gives up
        # waiting (timeout, cancellation) reads it under the same lock and hands a granted slot back.
        self.granted = False
        self.event = event
        self.future = future
        self.loop = loop

    def wake(self) -> None:
        if self.event is not None:
            self.event.set()
        elif self.future is not None and self.loop is not None:
            fut = self.future

            def resolve() -> None:
                if not fut.done():
                    fut.set_result(None)

            try:
                self.loop.call_soon_threadsafe(resolve)
            except RuntimeError:
                # The waiter's loop is closed: nobody will consume the slot. The caller that gave up
                # releases it (granted is already True), so nothing leaks.
                pass


def _refuse_inside_transaction() -> None:
    try:
        from dbos._context import get_local_dbos_context
    except ImportError:  # a DBOS without this context API: nothing to check against
        return
    ctx = get_local_dbos_context()
    if ctx is not None and ctx.is_transaction():
        raise CallLimiterMisuseError(
            "call limiter: refusing to wait for a slot inside a DBOS transaction, which would hold its "
            "database connection across the wait; make the agent call from a @DBOS.step instead"
        )


class CallLimiter:
    """Caps concurrent calls per key and in total; thread-safe, and usable from asyncio without blocking it.

    Use ``with limiter.slot(key):`` / ``limiter.run(key, fn)`` from threads (DBOS steps), and
    ``async with limiter.slot_async(key):`` / ``await limiter.run_async(key, coro_fn)`` from coroutines. All
    four share the same caps and the same line.
    """

    def __init__(self, *, per_key: int, global_limit: int, acquire_timeout_sec: float) -> None:
        for name, value in (("per_key", per_key), ("global_limit", global_limit)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"limit_calls: {name} must be a positive integer, got {value!r}")
        if (
            isinstance(acquire_timeout_sec, bool)
            or not isinstance(acquire_timeout_sec, (int, float))
            or not acquire_timeout_sec >= 0
            or acquire_timeout_sec == float("inf")
        ):
            raise ValueError(
                f"limit_calls: acquire_timeout_sec must be a finite number >= 0, got {acquire_timeout_sec!r}"
            )
        self.per_key = per_key
        self.global_limit = global_limit
        self.acquire_timeout_sec = float(acquire_timeout_sec)
        self._lock = threading.Lock()
        self._per_key: Dict[str, int] = {}
        self._total = 0
        self._queue: Deque[_Waiter] = deque()

    # -- accounting, always under self._lock -------------------------------------------------------

    def _fits(self, key: str) -> bool:
        return self._total < self.global_limit and self._per_key.get(key, 0) < self.per_key

    def _take(self, key: str) -> None:
        self._total += 1
        self._per_key[key] = self._per_key.get(key, 0) + 1

    def _try_take_now(self, key: str) -> bool:
        if not self._fits(key):
            return False
        # Someone older may be waiting for the same capacity: queue behind them (arrival order), unless
        # every older waiter is blocked by its own key's cap (then the line does not block this key).
        if any(self._per_key.get(w.key, 0) < self.per_key for w in self._queue):
            return False
        self._take(key)
        return True

    def _release_locked(self, key: str) -> None:
        self._total -= 1
        n = self._per_key.get(key, 1) - 1
        if n <= 0:
            self._per_key.pop(key, None)
        else:
            self._per_key[key] = n
        # Hand freed capacity to the oldest waiters that fit, skipping keys at their own cap.
        for w in list(self._queue):
            if self._total >= self.global_limit:
                break
            if self._fits(w.key):
                self._queue.remove(w)
                self._take(w.key)
                w.granted = True
                w.wake()

    def _scope(self, key: str) -> Literal["key", "global"]:
        return "key" if self._per_key.get(key, 0) >= self.per_key else "global"

    def _give_up(self, waiter: _Waiter) -> Optional[Literal["key", "global"]]:
        """After a timeout or a cancellation: None when the slot was granted meanwhile (the caller owns it)."""
        with self._lock:
            if waiter.granted:
                return None
            with contextlib.suppress(ValueError):
                self._queue.remove(waiter)
            return self._scope(waiter.key)

    def _release(self, key: str) -> None:
        with self._lock:
            self._release_locked(key)

    # -- threads -----------------------------------------------------------------------------------

    def acquire(self, key: str) -> None:
        """Takes a slot for ``key``, blocking this thread up to the timeout; pair with ``release``."""
        _refuse_inside_transaction()
        started = time.monotonic()
        with self._lock:
            if self._try_take_now(key):
                return
            waiter = _Waiter(key, threading.Event(), None, None)
            self._queue.append(waiter)
        assert waiter.event is not None
        waiter.event.wait(self.acquire_timeout_sec)
        scope = self._give_up(waiter)
        if scope is not None:
            raise CallBudgetExhaustedError(key, time.monotonic() - started, scope)

    def release(self, key: str) -> None:
        """Returns a slot taken with ``acquire``."""
        self._release(key)

    @contextlib.contextmanager
    def slot(self, key: str) -> Generator[None, None, None]:
        """``with limiter.slot("model-a"): call()``; the slot is returned on success and on error alike."""
        self.acquire(key)
        try:
            yield
        finally:
            self.release(key)

    def run(self, key: str, fn: Callable[[], T]) -> T:
        """Runs ``fn()`` in a slot for ``key`` (blocking this thread while it waits)."""
        with self.slot(key):
            return fn()

    # -- asyncio -----------------------------------------------------------------------------------

    async def acquire_async(self, key: str) -> None:
        """Takes a slot for ``key`` without blocking the event loop; pair with ``release``."""
        _refuse_inside_transaction()
        started = time.monotonic()
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._try_take_now(key):
                return
            fut: "asyncio.Future[None]" = loop.create_future()
            waiter = _Waiter(key, None, fut, loop)
            self._queue.append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(fut), self.acquire_timeout_sec)
        except asyncio.TimeoutError:
            pass
        except BaseException:
            # Cancelled while waiting: a slot granted in the meantime must go back, or it leaks.
            if self._give_up(waiter) is None:
                self._release(key)
            raise
        scope = self._give_up(waiter)
        if scope is not None:
            raise CallBudgetExhaustedError(key, time.monotonic() - started, scope)

    @contextlib.asynccontextmanager
    async def slot_async(self, key: str) -> AsyncGenerator[None, None]:
        """``async with limiter.slot_async("model-a"): await call()``."""
        await self.acquire_async(key)
        try:
            yield
        finally:
            self.release(key)

    async def run_async(self, key: str, fn: Callable[[], Union[Awaitable[T], T]]) -> T:
        """Runs ``fn()`` (a coroutine function, or a plain one) in a slot for ``key``."""
        async with self.slot_async(key):
            result = fn()
            if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
                return await result  # type: ignore[no-any-return]
            return result  # type: ignore[return-value]

    # -- introspection -----------------------------------------------------------------------------

    def active(self, key: Optional[str] = None) -> int:
        """Calls running now, in total or for one key."""
        with self._lock:
            return self._total if key is None else self._per_key.get(key, 0)

    def waiting(self) -> int:
        """Callers waiting for a slot."""
        with self._lock:
            return len(self._queue)


def limit_calls(*, per_key: int, global_limit: int, acquire_timeout_sec: float) -> CallLimiter:
    """A limiter for outbound agent calls: ``per_key`` per key (model, tenant), ``global_limit`` in total."""
    return CallLimiter(per_key=per_key, global_limit=global_limit, acquire_timeout_sec=acquire_timeout_sec)
