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
});
export type DeathNotice = z.infer<typeof DeathNotice>;
export type DeathReason = (typeof DEATH_REASONS)[number];

export function deathNotice(fields: Omit<DeathNotice, 'type' | 'version' | 'detectedAt'> & { detectedAt?: string }): DeathNotice {
  return DeathNotice.parse({ type: 'executor.dead', version: 1, detectedAt: new Date().toISOString(), ...fields });
}

export function deathNoticeAttributes(n: DeathNotice): Record<string, string> {
  return { type: n.type, executorId: n.executorId };
}
