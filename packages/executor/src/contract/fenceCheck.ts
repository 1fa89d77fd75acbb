import { type Infer, integer, nullish, object, oneOf, string } from './parse.js';

/**
 * Whether this process has been given up on, asked of the plane's own records (never of a NOTIFY, which
 * anyone who can connect may send):
 *   superseded  the registry names a newer incarnation of this executor ID: another process started with
 *               the ID, and DBOS's launch-time recovery hands it this process's work;
 *   dead        the registry says this incarnation is dead (the reaper, a notice or an operator said so);
 *   moved       a recovery has moved any of its workflows since the kit started (a recovery whose heartbeat
 *               re-check stopped it midway leaves the executor registered alive, yet those rows run elsewhere);
 *               a recovery about another incarnation of the ID (an earlier process) is not about this one.
 * Any of them: this process must stop before it runs another step body beside the replacement. The question
 * is asked on the kit's own connection by askFence (packages/executor/src/db/queries/liveness.ts); the answer is parsed here.
 */
export type FenceVerdict = 'dead' | 'moved' | 'superseded';

export const Fence = object({
  verdict: oneOf(['dead', 'moved', 'superseded']),
  reason: nullish(string()),
  detectedBy: nullish(string()),
  incarnation: nullish(string()),
  at: nullish(string()),
  moved: nullish(integer()),
});
export type Fence = Infer<typeof Fence>;
