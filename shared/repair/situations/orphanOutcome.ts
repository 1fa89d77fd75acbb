/**
 * What the orphaned-version repair is given and what it answers, apart from repairOrphaned (orphaned.ts)
 * and both of its ways (orphanedRewind.ts, orphanedFork.ts), which it imports.
 * @module
 */

export interface OrphanInfo {
  applicationName: string;
  executorId: string;
  applicationVersion: string | null;
  workflowIds: string[];
}

export type OrphanOutcome =
  | { workflowId: string; outcome: 'forked' | 'already-forked'; newWorkflowId: string; cancelled: boolean }
  | { workflowId: string; outcome: 'dead-lettered' | 'busy' | 'skipped' | 'failed' | 'rewound'; why?: string };
