"""The call limiter: per-key and global caps across threads and coroutines, the acquire timeout, release
on error and on cancellation, no starvation across keys, and the refusal to wait inside a transaction."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Callable, List

import pytest

from afterlife_executor.limiter import (
    CallBudgetExhaustedError,
    CallLimiter,
    CallLimiterMisuseError,
    limit_calls,
)

BOUND_SEC = 5.0


def wait_until(cond: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + BOUND_SEC
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


def start_threads(n: int, target: Callable[[int], None]) -> List[threading.Thread]:
    threads = [threading.Thread(target=target, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    return threads


def join_all(threads: List[threading.Thread]) -> None:
    for t in threads:
        t.join(BOUND_SEC)
        assert not t.is_alive(), "a caller thread did not finish"


def test_caps_concurrent_calls_per_key_across_threads() -> None:
    lim = limit_calls(per_key=2, global_limit=10, acquire_timeout_sec=BOUND_SEC)
    gate = threading.Event()
    peak = 0
    peak_lock = threading.Lock()

    def call(_: int) -> None:
        nonlocal peak

        def body() -> None:
            nonlocal peak
            with peak_lock:
                peak = max(peak, lim.active("model-a"))
            gate.wait(BOUND_SEC)

        lim.run("model-a", body)

    threads = start_threads(6, call)
    wait_until(lambda: lim.active("model-a") == 2 and lim.waiting() == 4, "2 running, 4 waiting")
    gate.set()
    join_all(threads)
    assert peak == 2
    assert lim.active() == 0
    assert lim.waiting() == 0


def test_caps_concurrent_calls_globally_across_keys() -> None:
    lim = limit_calls(per_key=5, global_limit=3, acquire_timeout_sec=BOUND_SEC)
    gate = threading.Event()
    keys = ["a", "b", "c", "d", "e", "a", "b"]
    peak = 0
    peak_lock = threading.Lock()

    def call(i: int) -> None:
        def body() -> None:
            nonlocal peak
            with peak_lock:
                peak = max(peak, lim.active())
            gate.wait(BOUND_SEC)

        lim.run(keys[i], body)

    threads = start_threads(len(keys), call)
    wait_until(lambda: lim.active() == 3 and lim.waiting() == 4, "3 running, 4 waiting")
    gate.set()
    join_all(threads)
    assert peak == 3


def test_times_out_with_a_typed_error_without_running_the_call() -> None:
    lim = limit_calls(per_key=1, global_limit=1, acquire_timeout_sec=0.05)
    with lim.slot("k"):
        ran = False

        def body() -> None:
            nonlocal ran
            ran = True

        started = time.monotonic()
        with pytest.raises(CallBudgetExhaustedError) as info:
            lim.run("k", body)
        waited = time.monotonic() - started
    err = info.value
    assert err.code == "call_budget_exhausted"
    assert err.disposition == "retry"
    assert err.key == "k"
    assert err.scope == "key"
    assert waited >= 0.045
    assert not ran
    assert lim.waiting() == 0
    assert lim.active() == 0


def test_global_scope_is_named_when_the_global_cap_blocks() -> None:
    lim = limit_calls(per_key=5, global_limit=1, acquire_timeout_sec=0.02)
    with lim.slot("a"):
        with pytest.raises(CallBudgetExhaustedError) as info:
            lim.run("b", lambda: None)
    assert info.value.scope == "global"


def test_releases_the_slot_when_the_call_raises() -> None:
    lim = limit_calls(per_key=1, global_limit=1, acquire_timeout_sec=0.1)

    def boom() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError):
        lim.run("k", boom)
    assert lim.active() == 0
    assert lim.run("k", lambda: "ok") == "ok"


def test_a_slow_key_at_its_cap_does_not_starve_other_keys() -> None:
    # Two global slots; key "slow" holds one and has a waiter queued behind its own cap. A strict FIFO
    # line would make "fast" wait behind that waiter although a global slot is free.
    lim = limit_calls(per_key=1, global_limit=2, acquire_timeout_sec=BOUND_SEC)
    slow_gate = threading.Event()

    def slow(_: int) -> None:
        lim.run("slow", lambda: slow_gate.wait(BOUND_SEC))

    threads = start_threads(2, slow)
    wait_until(lambda: lim.active("slow") == 1 and lim.waiting() == 1, "slow running and queued")
    started = time.monotonic()
    assert lim.run("fast", lambda: "done") == "done"
    assert time.monotonic() - started < 1.0
    slow_gate.set()
    join_all(threads)
    assert lim.active() == 0


def test_waiters_are_served_in_arrival_order_within_a_key() -> None:
    lim = limit_calls(per_key=1, global_limit=1, acquire_timeout_sec=BOUND_SEC)
    order: List[int] = []
    hold = threading.Event()
    lim.acquire("k")
    threads: List[threading.Thread] = []
    for i in range(4):
        t = threading.Thread(target=lambda i=i: lim.run("k", lambda: order.append(i)), daemon=True)
        t.start()
        threads.append(t)
        wait_until(lambda n=i + 1: lim.waiting() == n, f"{i + 1} waiting")
    hold.set()
    lim.release("k")
    join_all(threads)
    assert order == [0, 1, 2, 3]


def test_asyncio_waiters_do_not_block_the_loop_and_respect_the_cap() -> None:
    async def scenario() -> None:
        lim = limit_calls(per_key=2, global_limit=2, acquire_timeout_sec=BOUND_SEC)
        gate = asyncio.Event()
        peak = 0

        async def call() -> None:
            nonlocal peak

            async def body() -> None:
                nonlocal peak
                peak = max(peak, lim.active())
                await gate.wait()

            await lim.run_async("m", body)

        tasks = [asyncio.create_task(call()) for _ in range(5)]
        # The loop keeps running while three callers wait: this ticker advances.
        ticks = 0
        while lim.waiting() != 3 or ticks < 10:
            ticks += 1
            await asyncio.sleep(0.005)
            assert ticks < 1000, "callers never queued"
        assert lim.active() == 2
        gate.set()
        await asyncio.wait_for(asyncio.gather(*tasks), BOUND_SEC)
        assert peak == 2
        assert lim.active() == 0

    asyncio.run(scenario())


def test_asyncio_timeout_and_cancellation_leave_no_slot_behind() -> None:
    async def scenario() -> None:
        lim = limit_calls(per_key=1, global_limit=1, acquire_timeout_sec=0.05)
        await lim.acquire_async("k")
        with pytest.raises(CallBudgetExhaustedError):
            await lim.run_async("k", lambda: None)
        assert lim.waiting() == 0

        slow = CallLimiter(per_key=1, global_limit=1, acquire_timeout_sec=BOUND_SEC)
        await slow.acquire_async("k")
        waiter = asyncio.create_task(slow.acquire_async("k"))
        while slow.waiting() != 1:
            await asyncio.sleep(0.005)
        # Release and cancel in the same tick: the slot is granted to a waiter that is being cancelled;
        # it must come back rather than leak.
        slow.release("k")
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert slow.active() == 0
        assert slow.waiting() == 0
        await slow.run_async("k", lambda: None)
        lim.release("k")

    asyncio.run(scenario())


def test_threads_and_coroutines_share_one_cap() -> None:
    lim = limit_calls(per_key=1, global_limit=1, acquire_timeout_sec=BOUND_SEC)
    lim.acquire("k")
    got = threading.Event()

    def in_loop() -> None:
        async def go() -> None:
            async with lim.slot_async("k"):
                got.set()

        asyncio.run(go())

    t = threading.Thread(target=in_loop, daemon=True)
    t.start()
    wait_until(lambda: lim.waiting() == 1, "the coroutine to queue")
    assert not got.is_set()
    lim.release("k")
    t.join(BOUND_SEC)
    assert got.is_set()
    assert lim.active() == 0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"per_key": 0, "global_limit": 1, "acquire_timeout_sec": 1},
        {"per_key": 1, "global_limit": 0, "acquire_timeout_sec": 1},
        {"per_key": 1.5, "global_limit": 1, "acquire_timeout_sec": 1},
        {"per_key": True, "global_limit": 1, "acquire_timeout_sec": 1},
        {"per_key": 1, "global_limit": 1, "acquire_timeout_sec": -1},
        {"per_key": 1, "global_limit": 1, "acquire_timeout_sec": float("nan")},
        {"per_key": 1, "global_limit": 1, "acquire_timeout_sec": float("inf")},
    ],
)
def test_rejects_invalid_options(kwargs: dict) -> None:  # type: ignore[type-arg]
    with pytest.raises(ValueError):
        limit_calls(**kwargs)


def test_refuses_to_wait_inside_a_dbos_transaction() -> None:
    # DBOS marks a @DBOS.transaction by the SQL session on its context (DBOSContext.is_transaction).
    from dbos._context import DBOSContext, _dbos_context_var

    lim = limit_calls(per_key=1, global_limit=1, acquire_timeout_sec=0.01)
    ctx = DBOSContext()
    ctx.sql_session = object()  # type: ignore[assignment]
    token = _dbos_context_var.set(ctx)
    try:
        with pytest.raises(CallLimiterMisuseError, match="@DBOS.step"):
            lim.run("k", lambda: None)
        assert lim.active() == 0
    finally:
        _dbos_context_var.reset(token)
    assert lim.run("k", lambda: "ok") == "ok"
