import type { Logger } from '../../packages/executor/src/log.js';

/**
 * Cloud Scheduler's local stand-in: POSTs the reaper every `everyMs` whether or not the last call has
 * answered, as Scheduler does (the reaper's invocations overlap on purpose: a later one waits for the
 * lease as a standby, so there is no hole between them), at most MAX_IN_FLIGHT at once, and no retries —
 * the next call is the retry.
 */
const MAX_IN_FLIGHT = 3;
export interface Scheduler {
  calls: number;
  lastStatus: number | undefined;
  stop(): Promise<void>;
}

export function startScheduler(o: { url: string; everyMs: number; logger: Logger; timeoutMs?: number }): Scheduler {
  const log = o.logger.child({ scheduler: 'reaper' });
  const inFlight = new Set<Promise<void>>();
  const controller = new AbortController();
  const s: Scheduler = {
    calls: 0,
    lastStatus: undefined,
    stop: async () => {
      clearInterval(timer);
      controller.abort();
      await Promise.all(inFlight);
    },
  };
  const tick = () => {
    if (inFlight.size >= MAX_IN_FLIGHT) return;
    const call = (async () => {
      try {
        s.calls += 1;
        const res = await fetch(o.url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'user-agent': 'Google-Cloud-Scheduler' },
          body: '{}',
          signal: AbortSignal.any([controller.signal, AbortSignal.timeout(o.timeoutMs ?? 120_000)]),
        });
        s.lastStatus = res.status;
        await res.arrayBuffer().catch(() => undefined);
        if (!res.ok) log.warn('reaper call failed', { status: res.status });
      } catch (err) {
        if (!controller.signal.aborted) log.warn('reaper call errored', { err });
      }
    })();
    inFlight.add(call);
    void call.finally(() => inFlight.delete(call));
  };
  const timer = setInterval(tick, o.everyMs);
  tick();
  return s;
}
