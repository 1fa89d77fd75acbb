import { holdExit, withTimeout } from '../lifecycle/orderedShutdown.js';
import type { KitCore } from './core.js';
import { sleep } from './guarded.js';
import { handOver } from './handOver.js';
import {
  CLOUD_RUN_GRACE_MS,
  DEFAULT_HANDOVER_RESERVE_MS,
  DEFAULT_SHUTDOWN_MARGIN_MS,
  HARD_EXIT_BEFORE_GRACE_MS,
  STEP_TIMEOUT_MS,
} from './timeouts.js';

/**
 * SIGTERM/SIGINT: mark draining (synchronously) → stop dequeues → wait for in-flight work up to the budget →
 * death notice if any of its workflows are still PENDING → delete the heartbeat → exit, all inside Cloud
 * Run's 10 s. Everything before the first await is synchronous, so the kit is `exiting` and the
 * framework's exit is held before any other listener runs. A second signal skips the wait.
 */
export function terminate(kit: KitCore, sig: NodeJS.Signals, fastPath: () => void): void {
  if (kit.lifecycle.signalOwnsExit()) {
    kit.log.warn(`second ${sig}: fast path`);
    fastPath();
    return;
  }
  const wasDrained = kit.lifecycle.phase === 'drained';
  // A fenced kit's exit is already taken (fenceNow, or the embedder's onFenced); a closed one has no listener.
  if (!kit.lifecycle.signal()) return;
  const received = Date.now();
  const exit = holdExit();
  const o = kit.options;
  const grace = o.shutdownGraceMs ?? CLOUD_RUN_GRACE_MS;
  const margin = Math.min(o.shutdownMarginMs ?? DEFAULT_SHUTDOWN_MARGIN_MS, grace / 2);
  const hard = setTimeout(
    () => {
      kit.log.error('shutdown grace nearly over: exiting now', { event: 'shutdown_forced' });
      exit(1);
    },
    Math.max(0, grace - HARD_EXIT_BEFORE_GRACE_MS),
  );
  const budgetMs = grace - margin;
  const waitMs = Math.max(0, budgetMs - Math.min(o.handOverReserveMs ?? DEFAULT_HANDOVER_RESERVE_MS, budgetMs / 2));
  kit.log.notice(`${sig}: draining`, { budgetMs, waitMs, event: 'executor_draining' });
  void (async () => {
    // The beat keeps running (state draining) until close(): a key that lapsed mid-drain would let the
    // reaper's heartbeat-only rule declare this working executor dead and run its steps a second time.
    const announce = Promise.all([kit.beat(), kit.registry('draining', 'sigterm')]);
    if (!wasDrained) {
      const stopped = kit.app.shutdown(waitMs).then(
        () => 'stopped' as const,
        (err: unknown) => (kit.log.error('DBOS shutdown failed', { err }), 'failed' as const),
      );
      const outcome = await Promise.race([
        stopped,
        kit.fastPathRequested.then(() => 'fast' as const),
        sleep(waitMs + 250).then(() => 'timeout' as const),
      ]);
      kit.log.info('in-flight wait over', { outcome, elapsedMs: Date.now() - received });
    }
    // From here every step shares what is left of the budget, so the exit lands inside it (and, whatever
    // happens, the hard timer still beats SIGKILL).
    const deadline = received + budgetMs;
    const left = (capMs: number) => Math.max(50, Math.min(capMs, deadline - Date.now()));
    await withTimeout(announce, left(STEP_TIMEOUT_MS)).catch(() => undefined);
    kit.markDrained();
    await handOver(kit, 'sigterm', left);
    await withTimeout(kit.close(left), left(STEP_TIMEOUT_MS)).catch(() => undefined);
    clearTimeout(hard);
    kit.log.notice('exiting', { elapsedMs: Date.now() - received, event: 'executor_exit' });
    exit(0);
  })();
}
