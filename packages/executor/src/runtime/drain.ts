import { holdExit, withTimeout } from '../lifecycle/orderedShutdown.js';
import type { KitCore } from './core.js';
import { handOver } from './handOver.js';
import { DRAIN_EXIT_REGISTRY_MS } from './timeouts.js';

/**
 * A planned drain (a drain request, or `kit.drain()`): stop intake, finish what we hold within the budget,
 * hand the rest over, then idle — unless work outlived the budget. DBOS is shut down by then, but the code
 * of a workflow it stopped waiting for still runs in this process, while the `drained` notice has recovery
 * run it elsewhere: the same step would run twice at once, and this copy can no longer record anything.
 * Exiting stops it, so leftovers always exit (after the notice and the heartbeat delete), whatever
 * `exitAfterPlannedDrain` says.
 */
export async function plannedDrain(kit: KitCore, budgetMs: number): Promise<void> {
  const started = Date.now();
  // Only from alive: a drain asked of a kit that is exiting, fenced or closed has nothing to do.
  if (!kit.lifecycle.beginDrain()) return;
  await Promise.all([kit.beat(), kit.registry('draining', 'drain-request')]);
  try {
    await kit.app.shutdown(budgetMs);
  } catch (err) {
    kit.log.error('DBOS shutdown failed during drain', { err });
  }
  if (kit.lifecycle.signalOwnsExit()) return; // a SIGTERM took over and finishes the job
  const pending = await handOver(kit, 'drained');
  const running = kit.app.runningCount() ?? 0;
  // Unknown (Postgres could not say) counts as left over: staying up is only safe when nothing is.
  const leftovers = pending !== 0 || running > 0;
  // Refused when a SIGTERM arrived during the hand-over (its path exits) or a fence or close took over.
  if (!kit.lifecycle.finishDrain()) return;
  kit.markDrained();
  if (leftovers) {
    // The notice is out, so recovery may already be running this work elsewhere: nothing (a beat, a slow
    // database) may stand long between it and the exit. The registry write comes first, capped, and only
    // then the heartbeat delete: a drain report must never see the key gone while the registry still says
    // `draining` (it would read `unknown`).
    kit.log.notice('work outlived the drain budget: exiting, so that it stops here while recovery runs it elsewhere', {
      pending: pending ?? 'unknown',
      running,
      event: 'executor_drain_exit',
    });
    const exit = holdExit();
    await withTimeout(kit.registry('drained', 'drain-request'), DRAIN_EXIT_REGISTRY_MS).catch(() => undefined);
    await kit.close();
    exit(0);
    return;
  }
  // The registry first, then the beat: a drain report that reads the key as `drained` must find the
  // registry saying so too, never `unknown` in between.
  await kit.registry('drained', 'drain-request');
  await kit.beat();
  kit.log.notice('drained', { elapsedMs: Date.now() - started, pending: pending ?? 'unknown', running, event: 'executor_drained' });
  if (kit.options.exitAfterPlannedDrain && !kit.lifecycle.signalOwnsExit()) {
    const exit = holdExit();
    await kit.close();
    exit(0);
  }
}
