import { grantsCheck } from './grants.js';
import { idleTransactionsCheck } from './idleTransactions.js';
import { kitsCheck } from './kits.js';
import { livenessCheck } from './liveness.js';
import { indexCheck } from './optInIndex.js';
import { planeCheck } from './plane.js';
import { poolerCheck } from './pooler.js';
import { redisCheck } from './redis.js';
import { settingsCheck } from './settings.js';
import { type Check, type CheckResult, docOf, type DoctorDeps } from './types.js';
import { unattributedCheck } from './unattributed.js';
import { versionsCheck } from './versions.js';
import { errorMessage } from '../../packages/executor/src/plane/index.js';

/** The chain, in the order an operator fixes it: the plane, the kits it watches, grants, sessions, Redis, tuning. */
export const CHECKS: Check[] = [
  planeCheck,
  kitsCheck,
  versionsCheck,
  grantsCheck,
  livenessCheck,
  poolerCheck,
  unattributedCheck,
  idleTransactionsCheck,
  redisCheck,
  indexCheck,
  settingsCheck,
];

/** Runs every check; one that cannot read its evidence is a FAIL saying why, and the rest still run. */
export async function runDoctor(deps: DoctorDeps, checks: Check[] = CHECKS): Promise<CheckResult[]> {
  const out: CheckResult[] = [];
  for (const c of checks) {
    const head = { id: c.id, title: c.title, doc: docOf(c.id) };
    try {
      out.push({ ...head, ...(await c.run(deps)) });
    } catch (err) {
      const message = errorMessage(err);
      out.push({
        ...head,
        status: 'FAIL',
        summary: `could not check: ${message}`,
        details: [],
        fix: 'run doctor as a role that can read both schemas and pg_catalog',
      });
    }
  }
  return out;
}
