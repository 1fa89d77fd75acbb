// Scratch (not committed): is a bare batched UPDATE already ~1.3x DBOS's single statement at 10k?
import pg from 'pg';
import { cloneDatabase, createDbosDatabase, dropDatabase, admin, median } from '../dist/bench/lib.js';
const N = Number(process.argv[2] ?? 10000), REPS = Number(process.argv[3] ?? 7);
const APP = 'bench-app';
const tpl = `bare_tpl_${process.pid}`;
const url = await createDbosDatabase(tpl);
{ const c = new pg.Client({ connectionString: url }); await c.connect();
  await c.query(`INSERT INTO dbos.workflow_status (workflow_uuid, status, name, class_name, config_name, executor_id, application_version, application_name, queue_name, recovery_attempts, owner_xid, created_at, updated_at, started_at_epoch_ms, serialization)
     SELECT 'orphan-' || g, 'PENDING', 'agentWorkflow', '', '', 'dead-1', 'v1', $2, CASE WHEN g % 2 = 0 THEN 'agents' END, 1, md5(g::text), 1700000000000 + g, 1700000000000 + g, CASE WHEN g % 2 = 0 THEN 1700000000000 + g END, 'js_superjson' FROM generate_series(1, $1) g`, [N, APP]);
  await c.query(`INSERT INTO dbos.workflow_status (workflow_uuid, status, name, class_name, config_name, executor_id, application_version, application_name, queue_name, recovery_attempts, owner_xid, created_at, updated_at, serialization)
     SELECT 'noise-' || g, (ARRAY['PENDING', 'SUCCESS', 'SUCCESS', 'ERROR'])[1 + g % 4], 'agentWorkflow', '', '', 'live-' || (g % 20), 'v1', CASE WHEN g % 10 = 0 THEN 'other-app' ELSE $2 END, NULL, 1, md5(g::text), 1700000000000 + g, 1700000000000 + g, 'js_superjson' FROM generate_series(1, $1 * 4) g`, [N, APP]);
  await c.query('VACUUM ANALYZE dbos.workflow_status'); await c.end(); }
const SET = `SET started_at_epoch_ms = NULL, status = 'ENQUEUED', owner_xid = NULL, updated_at = (EXTRACT(EPOCH FROM now()) * 1000)::bigint, queue_name = COALESCE(queue_name, '_dbos_internal_queue')`;
const methods = {
  dbos: async (c) => { await c.query(`UPDATE dbos.workflow_status ${SET} WHERE status = 'PENDING' AND executor_id = $1 AND application_version = $2 AND (application_name = ANY($3) OR application_name IS NULL) RETURNING workflow_uuid`, ['dead-1', 'v1', [APP]]); },
  bare: async (c) => {
    let cur = '0';
    for (;;) {
      const r = await c.query({ name: 'bare', text: `UPDATE dbos.workflow_status ${SET} WHERE ctid = ANY(ARRAY(SELECT ctid FROM dbos.workflow_status WHERE status = 'PENDING' AND executor_id = $1 AND application_version = $2 AND created_at > $3::bigint ORDER BY created_at LIMIT 1000)) AND status = 'PENDING' AND executor_id = $1 RETURNING created_at::text`, values: ['dead-1', 'v1', cur] });
      if (r.rowCount < 1000) break;
      cur = r.rows.reduce((m, x) => (BigInt(x.created_at) > BigInt(m) ? x.created_at : m), '0');
    }
  },
  bare5000: async (c) => {
    let cur = '0';
    for (;;) {
      const r = await c.query({ name: 'bare5', text: `UPDATE dbos.workflow_status ${SET} WHERE ctid = ANY(ARRAY(SELECT ctid FROM dbos.workflow_status WHERE status = 'PENDING' AND executor_id = $1 AND application_version = $2 AND created_at > $3::bigint ORDER BY created_at LIMIT 5000)) AND status = 'PENDING' AND executor_id = $1 RETURNING created_at::text`, values: ['dead-1', 'v1', cur] });
      if (r.rowCount < 5000) break;
      cur = r.rows.reduce((m, x) => (BigInt(x.created_at) > BigInt(m) ? x.created_at : m), '0');
    }
  },
};
const times = Object.fromEntries(Object.keys(methods).map((k) => [k, []]));
for (let r = 0; r < REPS; r++) for (const [k, fn] of Object.entries(methods)) {
  const name = `bare_run_${process.pid}`; const u = await cloneDatabase(tpl, name);
  await admin((c) => c.query('CHECKPOINT'));
  const c = new pg.Client({ connectionString: u }); await c.connect();
  const t = process.hrtime.bigint(); await fn(c); times[k].push(Number(process.hrtime.bigint() - t) / 1e6);
  const left = (await c.query(`SELECT count(*)::int AS n FROM dbos.workflow_status WHERE status='PENDING' AND executor_id='dead-1'`)).rows[0].n;
  if (left) throw new Error(`${k} left ${left}`);
  await c.end(); await dropDatabase(name);
}
await dropDatabase(tpl);
for (const [k, xs] of Object.entries(times)) console.log(k, median(xs).toFixed(0), 'ms', (median(xs) / median(times.dbos)).toFixed(2), xs.map((x) => x.toFixed(0)).join(' '));
