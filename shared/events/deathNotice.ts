import { z } from 'zod';

/**
 * The death notice (DESIGN.md, "Contracts"). Unknown fields are ignored (zod strips them), missing or
 * wrong fields are rejected. Published on `executor-deaths` with attributes `type` and `executorId` and
 * ordering key `executorId`.
 */
export const DEATH_REASONS = ['sigterm', 'drained', 'heartbeat-lapsed', 'manual'] as const;

export const DeathNotice = z.object({
  type: z.literal('executor.dead'),
  version: z.literal(1),
  executorId: z.string().min(1).max(512),
  applicationName: z.string().min(1).max(512),
  applicationVersions: z.array(z.string().min(1).max(512)).max(1_000).optional(),
  reason: z.enum(DEATH_REASONS),
  detectedAt: z.iso.datetime({ offset: true }),
  detectedBy: z.string().min(1).max(512),
  /**
   * What the reaper's declaration rested on (heartbeat-lapsed notices): `liveness` (its lock free and its
   * beat stale) makes every recovery batch re-check that the lock is still free; `staleBeatAt` is the last
   * beat it saw, so a key that is still there with that beat is no sign of life, and only a newer one is.
   */
  evidence: z.enum(['liveness', 'heartbeat', 'sessions']).optional(),
  staleBeatAt: z.iso.datetime({ offset: true }).optional(),
});
export type DeathNotice = z.infer<typeof DeathNotice>;
export type DeathReason = (typeof DEATH_REASONS)[number];

export function deathNotice(fields: Omit<DeathNotice, 'type' | 'version' | 'detectedAt'> & { detectedAt?: string }): DeathNotice {
  return DeathNotice.parse({ type: 'executor.dead', version: 1, detectedAt: new Date().toISOString(), ...fields });
}

export function deathNoticeAttributes(n: DeathNotice): Record<string, string> {
  return { type: n.type, executorId: n.executorId };
}
