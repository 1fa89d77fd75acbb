import type { Config } from '../config/index.js';

/**
 * The policy in force, from RETENTION_MAX_COMPLETED, RETENTION_MAX_AGE_MS and WORKFLOW_GLOBAL_TIMEOUT_MS.
 * Off by default: deleting workflow history cannot be undone, and a team moving from Conductor (whose
 * default keeps 1M completed workflows) chooses its own numbers. `afterlife-plane status` prints `describe()`.
 */
export interface RetentionPolicy {
  maxCompleted: number | undefined;
  maxAgeMs: number | undefined;
  globalTimeoutMs: number | undefined;
}

export function policyOf(config: Pick<Config, 'retention'>): RetentionPolicy {
  return { ...config.retention };
}

/** Whether completed workflows are deleted at all (either threshold set). */
export function deletes(p: RetentionPolicy): boolean {
  return p.maxCompleted !== undefined || p.maxAgeMs !== undefined;
}

export function enabled(p: RetentionPolicy): boolean {
  return deletes(p) || p.globalTimeoutMs !== undefined;
}

export function describePolicy(p: RetentionPolicy, fmt: (ms: number) => string): string {
  const parts: string[] = [];
  if (p.maxCompleted !== undefined) parts.push(`keep the newest ${p.maxCompleted.toLocaleString('en-US')} completed workflows`);
  if (p.maxAgeMs !== undefined) parts.push(`delete completed workflows older than ${fmt(p.maxAgeMs)}`);
  const del = parts.length ? parts.join(' and ') : 'OFF — nothing is deleted (RETENTION_MAX_COMPLETED and RETENTION_MAX_AGE_MS unset)';
  const timeout =
    p.globalTimeoutMs !== undefined
      ? `cancel workflows not completed ${fmt(p.globalTimeoutMs)} after creation`
      : 'OFF (WORKFLOW_GLOBAL_TIMEOUT_MS unset)';
  return `retention: ${del}; global timeout: ${timeout}`;
}
