import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { TEST_REDIS_URL } from './services.js';

/** Environment that turns the executor kit on in the example app (REDIS_URL, emulator, topic, TTL). */
export function kitEnv(
  o: { topic?: string; ttlMs?: number; emulatorHost?: string | null; env?: Record<string, string> } = {},
): Record<string, string> {
  return {
    AFTERLIFE_KIT: 'on',
    REDIS_URL: TEST_REDIS_URL,
    HEARTBEAT_TTL_MS: String(o.ttlMs ?? 3_000),
    GOOGLE_CLOUD_PROJECT: 'afterlife-test',
    ...(o.topic ? { EXECUTOR_DEATH_TOPIC: o.topic } : {}),
    ...(o.emulatorHost ? { PUBSUB_EMULATOR_HOST: o.emulatorHost } : { AFTERLIFE_PUBLISH: 'none' }),
    ...o.env,
  };
}

/** functions-framework's CLI entry: forking it directly gives one PID to signal (no npx → sh chain). */
export const FUNCTIONS_FRAMEWORK_MAIN = fileURLToPath(
  new URL('../../node_modules/@google-cloud/functions-framework/build/src/main.js', import.meta.url),
);
export const AGENT_SERVE = fileURLToPath(new URL('../../dist/examples/agent-app/serve.js', import.meta.url));
/** The same app with the kit attached on the first request, after functions-framework began listening. */
export const AGENT_SERVE_LATE = fileURLToPath(new URL('../../dist/examples/agent-app/serveLate.js', import.meta.url));

/** The database clock, for timings against `step_runs.at` (also the database clock). */
export async function dbNow(sql: pg.Pool): Promise<number> {
  const r = await sql.query<{ t: Date }>('SELECT clock_timestamp() AS t');
  return (r.rows[0] as { t: Date }).t.getTime();
}

export async function firstStepAt(sql: pg.Pool, executorId: string, workflowIds: string[]): Promise<number | undefined> {
  const r = await sql.query<{ t: Date | null }>(
    `SELECT min(at) AS t FROM public.step_runs WHERE executor_id = $1 AND phase = 'start' AND workflow_id = ANY($2)`,
    [executorId, workflowIds],
  );
  return r.rows[0]?.t?.getTime();
}

export async function statuses(sql: pg.Pool, ids: string[]): Promise<Record<string, number>> {
  const r = await sql.query<{ status: string; n: number }>(
    `SELECT status, count(*)::int AS n FROM dbos.workflow_status WHERE workflow_uuid = ANY($1) GROUP BY status`,
    [ids],
  );
  return Object.fromEntries(r.rows.map((x) => [x.status, x.n]));
}
