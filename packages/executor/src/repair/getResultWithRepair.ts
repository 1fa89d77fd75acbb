import type { DBOSClient, WorkflowStatus } from '@dbos-inc/dbos-sdk';
import { divergenceOf } from '../dbos/divergence.js';
import { executePlan } from './primitives/fork.js';
import { type ForkClient, forkId, lineageOf, type TargetVersion } from './primitives/lineage.js';
import { planDivergenceFork } from './situations/divergedPlan.js';

/**
 * For app code: a workflow's result, through afterlife's repairs. A plain `getResult()` on a diverged
 * workflow rejects with `DBOSUnexpectedStepError` (code 26) as soon as it ends ERROR, and again on every
 * later call until it is repaired; once afterlife rewinds it, the same ID goes ERROR → ENQUEUED → PENDING
 * → SUCCESS and a new `getResult()` waits for that. This helper bridges the gap: on a divergence (or a
 * cancellation afterlife may repair) it waits, up to `repairTimeoutMs`, for the workflow to be rewound
 * (it leaves ERROR, or ends again later) or forked (`was_forked_from`: it follows the fork), and awaits
 * the repaired run. It needs only a DBOSClient and writes nothing.
 *
 * With `repair: 'fork'` it forks by itself instead (the behaviour of getResultWithAutoFork, kept under
 * that name): the same planner and deterministic IDs as afterlife, so whichever acts first makes the fork.
 * It cannot rewind by itself: a rewind leaves no trace in DBOS's tables, so only afterlife's ledger can
 * bound them.
 */
export class ForkBudgetExhaustedError extends Error {
  constructor(
    readonly rootWorkflowId: string,
    readonly forks: number,
    readonly workflowId: string,
    readonly lastError: unknown,
  ) {
    super(`workflow ${rootWorkflowId} kept diverging after ${forks} forks (last: ${workflowId})`, { cause: lastError });
    this.name = 'ForkBudgetExhaustedError';
  }
}

export interface RepairOptions {
  /** 'wait' (default): wait for afterlife's rewind or fork. 'fork': fork here, as getResultWithAutoFork did. */
  repair?: 'wait' | 'fork';
  maxForks?: number;
  targetVersion?: TargetVersion;
  /** How long to wait for a repair after each failed ending (default 5 minutes). */
  repairTimeoutMs?: number;
  /** Status poll interval while waiting for a repair (default 1 s). */
  pollMs?: number;
  /** Called with each fork this helper follows (made here or found made). */
  onFork?: (info: { from: string; to: string; n: number; startStep: number }) => void;
  /** Called when the workflow was seen repaired in place (rewound). */
  onRewind?: (info: { workflowId: string }) => void;
}

export const DEFAULT_REPAIR_TIMEOUT_MS = 300_000;

export async function getResultWithRepair<R>(client: ForkClient, workflowId: string, opts: RepairOptions = {}): Promise<R> {
  const maxForks = opts.maxForks ?? 3;
  let current = workflowId;
  for (;;) {
    try {
      return (await client.retrieveWorkflow<R>(current).getResult()) as R;
    } catch (err) {
      if (opts.repair === 'fork') {
        const next = await forkHere(client, current, err, maxForks, opts);
        current = next;
        continue;
      }
      current = await awaitRepair(client, current, err, opts);
    }
  }
}

/**
 * A stream consumer that survives repairs: DBOS's `readStream` ends when the writer ends without closing
 * the stream (a diverged workflow in ERROR). This reads on from the same offset once afterlife rewound the
 * workflow (same ID), to the stream's close. A rewind keeps the entries the discarded run wrote (DBOS
 * removes only the close marker), so what was already read stays read and the repaired run's entries follow.
 * A workflow repaired by a fork ends the stream here: the fork is another workflow with its own stream.
 */
export async function* readStreamWithRepair<T>(
  client: ForkClient & Pick<DBOSClient, 'readStream'>,
  workflowId: string,
  key: string,
  opts: Omit<RepairOptions, 'repair'> = {},
): AsyncGenerator<T, void, unknown> {
  let offset = 0;
  for (;;) {
    let read = 0;
    for await (const value of client.readStream<T>(workflowId, key, { offset })) {
      offset += 1;
      read += 1;
      yield value;
    }
    const s = await client.getWorkflow(workflowId);
    if (!s) return;
    if (['ERROR', 'CANCELLED'].includes(s.status)) {
      const next = await awaitRepair(
        client,
        workflowId,
        new Error(`stream ${key} of ${workflowId} ended with the workflow ${s.status}`),
        opts,
        s,
      );
      if (next !== workflowId) return;
      continue;
    }
    // Rewound and run on meanwhile: read on; finished with nothing more to read: the end.
    if (read === 0 && !['ENQUEUED', 'PENDING', 'DELAYED'].includes(s.status)) return;
  }
}

/** Waits for afterlife to repair `id` after it failed with `err`; the ID to await next (itself, or its fork). */
async function awaitRepair(client: ForkClient, id: string, err: unknown, opts: RepairOptions, seen?: WorkflowStatus): Promise<string> {
  const first = seen ?? (await client.getWorkflow(id));
  const repairable = divergenceOf(err) !== undefined || divergenceOf(first?.error) !== undefined || first?.status === 'CANCELLED';
  if (!first || !repairable) throw err;
  const deadline = Date.now() + (opts.repairTimeoutMs ?? DEFAULT_REPAIR_TIMEOUT_MS);
  for (;;) {
    const now = await client.getWorkflow(id);
    if (!now) throw err;
    if (now.wasForkedFrom) {
      const next = await forkOf(client, id, now.forkedFrom);
      if (next) return next;
    }
    // Left its ending (rewound: ENQUEUED, PENDING), or ended again since: await the new run.
    if (!['ERROR', 'CANCELLED'].includes(now.status) || now.completedAt !== first.completedAt) {
      opts.onRewind?.({ workflowId: id });
      return id;
    }
    if (Date.now() >= deadline) throw err;
    await new Promise((r) => setTimeout(r, opts.pollMs ?? 1_000));
  }
}

/** The fork of `id` afterlife (or this helper) made: the deterministic `<root>-fork-<depth+1>`. */
async function forkOf(client: ForkClient, id: string, forkedFrom: string | undefined): Promise<string | undefined> {
  const { root, depth } = await lineageOf(client, id, forkedFrom);
  const candidate = forkId(root, depth + 1);
  return (await client.getWorkflow(candidate))?.forkedFrom === id ? candidate : undefined;
}

async function forkHere(client: ForkClient, current: string, err: unknown, maxForks: number, opts: RepairOptions): Promise<string> {
  if (!divergenceOf(err)) {
    const status = await client.getWorkflow(current);
    if (status?.status !== 'CANCELLED' || !status.wasForkedFrom) throw err;
    const next = await forkOf(client, current, status.forkedFrom);
    if (!next) throw err;
    return next;
  }
  const planned = await planDivergenceFork(client, current, { maxForks, targetVersion: opts.targetVersion ?? 'latest' });
  if (planned.kind === 'exhausted') throw new ForkBudgetExhaustedError(planned.root, planned.n - 1, current, err);
  if (planned.kind === 'skip') throw err;
  await executePlan(client, planned.plan);
  opts.onFork?.({ from: current, to: planned.plan.newWorkflowId, n: planned.plan.n, startStep: planned.plan.startStep });
  return planned.plan.newWorkflowId;
}
