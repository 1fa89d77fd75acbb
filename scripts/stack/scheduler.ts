import type { Logger } from '../../shared/log.js';

/**
 * Cloud Scheduler's local stand-in: POSTs the reaper every `everyMs`, never two calls at once (Scheduler
 * has no overlap either when the attempt deadline covers the run), and no retries — the next tick is the retry.
 */
export interface Scheduler {
  calls: number;
  lastStatus: number | undefined;
  stop(): Promise<void>;
}

export function startScheduler(o: { url: string; everyMs: number; logger: Logger; timeoutMs?: number }): Scheduler {
  const log = o.logger.child({ scheduler: 'reaper' });
  let inFlight: Promise<void> | undefined;
  const controller = new AbortController();
  const s: Scheduler = {
    calls: 0,
    lastStatus: undefined,
    stop: async () => {
      clearInterval(timer);
      controller.abort();
      await inFlight;
    },
  };
  const tick = () => {
    if (inFlight) return;
    inFlight = (async () => {
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
      } finally {
        inFlight = undefined;
      }
    })();
  };
  const timer = setInterval(tick, o.everyMs);
  tick();
  return s;
}
