/**
 * What the orphaned-version repair is given and what it answers, apart from both of its ways (fork-to-latest
 * in orphans.ts, rewind in rewindOrphans.ts) so that neither imports the other for them.
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
