import { pendingByVersion } from '../dbos/pendingByVersion.js';
import { deathNotice, type DeathReason } from '../contract/deathNotice.js';
import { publishDeathNotice } from '../events/publish.js';
import { withTimeout } from '../lifecycle/orderedShutdown.js';
import { type KitCore, type Left, noDeadline } from './core.js';
import { DEFAULT_PUBLISH_TIMEOUT_MS, STEP_TIMEOUT_MS } from './timeouts.js';

/**
 * If any of our workflows is still PENDING, say so with a death notice, so recovery hands them to a live
 * executor now instead of after the reaper notices. When Postgres can't tell, publish anyway: a notice for
 * an executor with nothing left costs one no-op recovery. Returns the PENDING count (undefined: unknown).
 * From here on the kit is handing over, so the recovery it asks for must not fence it.
 */
export async function handOver(
  kit: KitCore,
  reason: Extract<DeathReason, 'sigterm' | 'drained'>,
  left: Left = noDeadline,
): Promise<number | undefined> {
  kit.lifecycle.beginHandOver();
  const pending = await withTimeout(pendingByVersion(kit.db, kit.applicationName, kit.executorId), left(STEP_TIMEOUT_MS)).catch(
    (err: unknown) => {
      kit.log.warn('could not count PENDING workflows; publishing the death notice anyway', { err });
      return undefined;
    },
  );
  const count = pending?.reduce((n, p) => n + p.count, 0);
  if (count === 0) {
    kit.log.info('nothing left PENDING: no death notice needed');
    if (reason === 'sigterm') await withTimeout(kit.registry('dead', 'sigterm'), left(STEP_TIMEOUT_MS)).catch(() => undefined);
    return 0;
  }
  const versions = [...new Set((pending ?? []).map((p) => p.applicationVersion).filter((v): v is string => v !== null))];
  if (!kit.publisher) {
    kit.log.warn('workflows left PENDING and no publisher: the reaper will recover them', { pending: count });
    return count;
  }
  try {
    // Inside the try: a notice that fails validation must not stop the shutdown that follows.
    const notice = deathNotice({
      executorId: kit.executorId,
      applicationName: kit.applicationName,
      ...(versions.length ? { applicationVersions: versions } : {}),
      reason,
      detectedBy: `afterlife-executor:${kit.executorId}`,
      incarnation: kit.incarnation,
    });
    const id = await withTimeout(
      publishDeathNotice(kit.publisher, kit.options.topic ?? 'executor-deaths', notice),
      left(kit.options.publishTimeoutMs ?? DEFAULT_PUBLISH_TIMEOUT_MS),
    );
    kit.log.notice('death notice published', { messageId: id, pending: count, reason, event: 'death_notice_published' });
  } catch (err) {
    // The reaper still finds this executor once it is gone (liveness lock free, heartbeat deleted).
    kit.log.error('death notice not published; the reaper will find this executor once it exits', {
      err,
      pending: count,
      event: 'death_notice_failed',
    });
  }
  return count;
}
