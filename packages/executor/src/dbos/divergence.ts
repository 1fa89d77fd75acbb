/**
 * Detection of replay divergence. DBOS ends a workflow in ERROR with `DBOSUnexpectedStepError`
 * (`dbosErrorCode` 26) when the step recorded at a `function_id` has another name than the one the replay
 * asks for. The serialized error's `name` is "Error", not the class name, so we match on the code and fall
 * back to the message pattern. When the error propagated from a child to the parent that awaited it, the
 * `workflowID` it names is the child's.
 * @module
 */

export const UNEXPECTED_STEP_CODE = 26;

export interface Divergence {
  /** The workflow whose replay diverged (a descendant's ID when the error propagated to a parent). */
  workflowId: string;
  /** The first divergent function_id: a fork must start at or before it. */
  stepId: number;
  expectedName: string | undefined;
  message: string;
}

const MESSAGE = /During execution of workflow (.+?) step (\d+), function (.+?) was recorded when (.+?) was expected/s;

/** Divergence carried by an error value (a deserialized DBOS error, or the plain object in the envelope). */
export function divergenceOf(error: unknown): Divergence | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const e = error as Record<string, unknown>;
  const message = typeof e.message === 'string' ? e.message : '';
  const m = MESSAGE.exec(message);
  if (e.dbosErrorCode !== UNEXPECTED_STEP_CODE && !m) return undefined;
  const workflowId = typeof e.workflowID === 'string' ? e.workflowID : m?.[1];
  const stepId = typeof e.stepID === 'number' ? e.stepID : m ? Number(m[2]) : undefined;
  if (workflowId === undefined || stepId === undefined || !Number.isInteger(stepId) || stepId < 0) return undefined;
  const expectedName = typeof e.expectedName === 'string' ? e.expectedName : m?.[4];
  return { workflowId, stepId, expectedName, message };
}

/**
 * Divergence from a stored payload: `COALESCE(workflow_output.error, workflow_status.error)`, either the
 * superjson envelope `{"json": {...}, "__dbos_serializer": "superjson"}` or a bare (legacy/portable) JSON
 * error. Anything unparseable is "not diverged": an ordinary ERROR is never forked.
 */
export function parseDivergence(stored: string | null | undefined): Divergence | undefined {
  if (!stored) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(stored);
  } catch {
    return divergenceOf({ message: stored });
  }
  if (typeof parsed === 'string') return divergenceOf({ message: parsed });
  if (typeof parsed === 'object' && parsed !== null && 'json' in parsed) parsed = (parsed as { json: unknown }).json;
  return divergenceOf(parsed);
}
