import type { Redis } from 'ioredis';
import type { Config } from '../config/index.js';
import type { Db } from '../../packages/executor/src/plane/index.js';

/**
 * `afterlife-plane doctor`'s vocabulary: every check reads the deployment (never writes) and answers PASS, WARN
 * or FAIL with what it saw, the fix, and the docs/operations.md section that explains it. FAIL means deaths
 * would go unrecovered (or be recovered wrongly); WARN means a weaker guarantee or evidence doctor could not read.
 */
export type Verdict = 'PASS' | 'WARN' | 'FAIL';

export interface CheckResult {
  id: string;
  title: string;
  status: Verdict;
  /** One line: what the check saw. */
  summary: string;
  /** One line per finding (an executor, a role, a table). */
  details: string[];
  /** What to do; absent on PASS. */
  fix?: string;
  /** Its section of the operations page (check-<id>). */
  doc: string;
}

export interface DoctorDeps {
  db: Db;
  config: Config;
  /** A connected client, or undefined (not configured: config.redis undefined; or not answering). */
  redis: Redis | undefined;
  /** The NOLOGIN roles of infra/grants.sql are `<rolePrefix>_executor_death`, `_reaper`, `_drain`. */
  rolePrefix: string;
}

export interface Check {
  id: string;
  title: string;
  run(deps: DoctorDeps): Promise<Omit<CheckResult, 'id' | 'title' | 'doc'>>;
}

const PAGE = 'docs/operations.md';
export const docOf = (id: string): string => `${PAGE}#check-${id}`;

export const pass = (summary: string, details: string[] = []) => ({ status: 'PASS' as const, summary, details });
export const warn = (summary: string, fix: string, details: string[] = []) => ({ status: 'WARN' as const, summary, details, fix });
export const fail = (summary: string, fix: string, details: string[] = []) => ({ status: 'FAIL' as const, summary, details, fix });

/** Detail lines printed per check; past it, one line says how many more (the count in the summary is of all). */
export const MAX_DETAILS = 50;

/** At most MAX_DETAILS lines, the last saying how many were left out. */
export function capped(lines: string[], max = MAX_DETAILS): string[] {
  return lines.length <= max ? lines : [...lines.slice(0, max - 1), `… and ${lines.length - (max - 1)} more`];
}
