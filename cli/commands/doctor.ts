import { runDoctor } from '../../shared/doctor/run.js';
import { inline } from '../format.js';
import type { CliContext } from '../context.js';
import type { DoctorOutput } from '../schemas.js';
import type { CommandResult } from './types.js';

/**
 * `afterlife-plane doctor`: the whole chain of a deployment checked from outside, read-only — a plane ticking for
 * the application, the kits it watches, DBOS's version, the functions' grants, the liveness sessions and a
 * pooler in front of them, the app role's idle-transaction limit, Redis, the recommended index, and the
 * settings the plane and the kits disagree on. Each PASS/WARN/FAIL with its fix and doc section (the checks
 * live in shared/doctor/, one module each); exit 1 on any FAIL.
 */
export async function doctor(ctx: CliContext, o: { rolePrefix: string }): Promise<CommandResult<DoctorOutput>> {
  const checks = await runDoctor({
    db: ctx.db,
    config: ctx.config,
    redis: ctx.redisReady ? ctx.redis : undefined,
    rolePrefix: o.rolePrefix,
  });
  const count = (s: DoctorOutput['checks'][number]['status']) => checks.filter((c) => c.status === s).length;
  const out: DoctorOutput = {
    command: 'doctor',
    applicationName: ctx.config.applicationName,
    generatedAt: new Date().toISOString(),
    checks,
    counts: { pass: count('PASS'), warn: count('WARN'), fail: count('FAIL') },
  };
  return { json: out, text: render(out), exitCode: out.counts.fail ? 1 : 0 };
}

/**
 * Every value is inline()d: summaries, details and fixes carry names anyone who can register a kit or write a
 * refusal chose (executor IDs, application names, refusal details), and a line break in one must not start a
 * line of its own (a forged `PASS` line or summary). `--json` carries them as they are.
 */
function render(out: DoctorOutput): string {
  const width = Math.max(...out.checks.map((c) => c.id.length));
  const lines = [`afterlife-plane doctor: application "${inline(out.applicationName)}"`, ''];
  for (const c of out.checks) {
    lines.push(`${c.status.padEnd(4)}  ${c.id.padEnd(width)}  ${inline(c.summary)}`);
    for (const d of c.details) lines.push(`${' '.repeat(width + 8)}- ${inline(d)}`);
    if (c.fix) lines.push(`${' '.repeat(width + 8)}fix: ${inline(c.fix)}`, `${' '.repeat(width + 8)}see: ${c.doc}`);
  }
  const { pass, warn, fail } = out.counts;
  lines.push('', `${pass} passed, ${warn} warned, ${fail} failed`);
  return `${lines.join('\n')}\n`;
}
