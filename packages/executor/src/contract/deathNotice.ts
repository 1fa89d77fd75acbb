import { pgText } from '../text.js';
import { array, boolean, type Infer, isoDatetime, literal, object, oneOf, optional } from './parse.js';

/**
 * The death notice (docs/design.md#death-notice). Unknown fields are ignored (dropped), missing or
 * wrong fields are rejected. Published on `executor-deaths` with attributes `type` and `executorId` and
 * ordering key `executorId`.
 */
export const DEATH_REASONS = ['sigterm', 'drained', 'heartbeat-lapsed', 'manual'] as const;

export const DeathNotice = object({
  type: literal('executor.dead'),
  version: literal(1),
  executorId: pgText(512),
  applicationName: pgText(512),
  applicationVersions: optional(array(pgText(512), { max: 1_000 })),
  reason: oneOf(DEATH_REASONS),
  detectedAt: isoDatetime(),
  detectedBy: pgText(512),
  /**
   * A notice about an executor whose heartbeat still says `alive` is refused (acked, logged, counted)
   * unless this is `true`: re-enqueuing a live executor's work runs its steps twice. The operator's
   * `afterlife-plane recover --force`, on the Pub/Sub path.
   */
  force: optional(boolean()),
  /**
   * What the reaper's declaration rested on (heartbeat-lapsed notices): `liveness` (its lock free and its
   * beat stale) makes every recovery batch re-check that the lock is still free; `staleBeatAt` is the last
   * beat it saw, so a key that is still there with that beat is no sign of life, and only a newer one is.
   */
  evidence: optional(oneOf(['liveness', 'heartbeat', 'sessions'])),
  staleBeatAt: optional(isoDatetime()),
  /**
   * The process start (incarnation) the notice is about, when known: the registry marks only that one dead,
   * so a notice about a process that is gone never lands on a newer process that reused the executor ID.
   */
  incarnation: optional(pgText(64)),
});
export type DeathNotice = Infer<typeof DeathNotice>;
export type DeathReason = (typeof DEATH_REASONS)[number];

export function deathNotice(fields: Omit<DeathNotice, 'type' | 'version' | 'detectedAt'> & { detectedAt?: string }): DeathNotice {
  return DeathNotice.parse({ type: 'executor.dead', version: 1, detectedAt: new Date().toISOString(), ...fields });
}

export function deathNoticeAttributes(n: DeathNotice): Record<string, string> {
  return { type: n.type, executorId: n.executorId };
}
