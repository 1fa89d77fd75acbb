import { ago, duration, inline, shellQuote, table } from '../format.js';
import type { StatusOutput } from '../schemas.js';
import { renderRecoveryTimes } from './recoveryTimes.js';

/**
 * `afterlife-plane status` as a person reads it: the executors' table, the workflow counts, stranded versions,
 * retention and the latest recoveries. Apart from status.ts, which gathers what this shows.
 */

/** Counting diverged workflows stops here (shown as "1000+"): the reaper works through them in batches. */
export const DIVERGED_LIMIT = 1_000;

export function render(s: StatusOutput): string {
  const lines = [`afterlife-plane status — application ${s.applicationName} — ${s.generatedAt} — redis ${s.redis}`, ''];
  lines.push(
    ...unguarded(s),
    ...executors(s),
    ...counts(s),
    ...stranded(s),
    ...retention(s),
    ...renderRecoveryTimes(s.recoveryTimes),
    ...recoveries(s),
  );
  return `${lines.join('\n')}\n`;
}

/** First, because it explains an empty table: the kits are there, under another name, and nothing guards them. */
function unguarded(s: StatusOutput): string[] {
  const apps = s.unguarded ?? [];
  if (apps.length === 0) return [];
  const ids = (a: (typeof apps)[number]) => `${a.executorIds.map(inline).join(', ')}${a.kits > a.executorIds.length ? ', …' : ''}`;
  return [
    ...apps.map((a) =>
      a.applicationName === s.applicationName
        ? `UNGUARDED: ${a.kits} live kit(s) under this application, ${inline(a.applicationName)} (${ids(a)}), and no plane ticking for it: their deaths are not recovered. Run a plane with DBOS_APPLICATION_NAME=${inline(shellQuote(a.applicationName))} (\`afterlife-plane doctor --app ${inline(shellQuote(a.applicationName))}\` checks the one deployed).`
        : `UNGUARDED: ${a.kits} live kit(s) under application ${inline(a.applicationName)} (${ids(a)}) and no plane ticking for it: their deaths are not recovered. Guard it (a plane with DBOS_APPLICATION_NAME=${inline(shellQuote(a.applicationName))}; \`afterlife-plane status --app ${inline(shellQuote(a.applicationName))}\` shows it) or give the app the name ${inline(s.applicationName)}.`,
    ),
    '',
  ];
}

function executors(s: StatusOutput): string[] {
  if (s.executors.length === 0) {
    const none = `no executors known under application ${inline(s.applicationName)} (no heartbeats, no registry rows, no PENDING workflows)`;
    const other = s.elsewhere ?? [];
    if (other.length === 0) return [none];
    return [
      `${none}; this database has executors under ${other.map((o) => `${inline(JSON.stringify(o.applicationName))} (${o.executors})`).join(', ')}: afterlife-plane status --app ${inline(shellQuote(other[0]?.applicationName ?? ''))}`,
    ];
  }
  return [
    table(
      ['EXECUTOR', 'STATE', 'LOCK', 'VERSION', 'HEARTBEAT', 'IN-FLIGHT', 'PENDING', 'STUCK', 'OLDEST ACTIVITY'],
      s.executors.map((e) => [
        e.executorId ?? '(none)',
        e.state,
        e.livenessLock ?? '-',
        e.applicationVersions.join(',') || '-',
        ago(e.heartbeatAgeMs),
        e.inFlight === null ? '-' : String(e.inFlight),
        String(e.pending),
        String(e.stuck),
        ago(e.oldestActivityAgeMs),
      ]),
    ),
  ];
}

function counts(s: StatusOutput): string[] {
  const byStatus = Object.entries(s.totals.byStatus)
    .map(([k, v]) => `${v} ${k}`)
    .join(', ');
  return [
    '',
    `workflows: ${byStatus || 'none'}`,
    `stuck: ${s.totals.stuck} (PENDING with no activity for ${duration(s.stuckAfterMs)})   diverged: ${s.totals.diverged >= DIVERGED_LIMIT ? `${DIVERGED_LIMIT}+` : s.totals.diverged} (ERROR with DBOSUnexpectedStepError, not forked or dead-lettered yet)`,
  ];
}

function stranded(s: StatusOutput): string[] {
  if (!s.stranded.known) return ['stranded: unknown (live versions come from heartbeats; Redis is not available)'];
  if (s.stranded.versions.length === 0) return ['stranded: none (every ENQUEUED version has a live executor)'];
  const then = s.stranded.policy === 'fork-to-latest' ? 'forks them to the latest live version' : 'reports them and leaves them ENQUEUED';
  return [
    '',
    `STRANDED: ENQUEUED work of versions no live executor runs — nothing claims it until an executor of that version starts`,
    table(
      ['VERSION', 'ENQUEUED', 'OLDEST', 'POLICY', 'ACTS'],
      s.stranded.versions.map((v) => [
        v.applicationVersion,
        String(v.count),
        ago(v.oldestAgeMs),
        s.stranded.policy,
        v.policyActsInMs === 0 ? 'due now' : `in ${duration(v.policyActsInMs)}`,
      ]),
    ),
    `ORPHANED_VERSION_POLICY=${s.stranded.policy}: after ORPHANED_VERSION_GRACE_MS (${duration(s.stranded.graceMs)}) untouched the reaper ${then}`,
  ];
}

function retention(s: StatusOutput): string[] {
  const r = s.retention;
  if (r.lastPass && r.lastPassAt) {
    return [
      '',
      r.summary,
      `last retention pass ${ago(Date.parse(s.generatedAt) - Date.parse(r.lastPassAt))}: deleted ${r.lastPass.deleted}, timed out ${r.lastPass.timedOut}, ` +
        `${r.lastPass.batches} batch(es), longest ${duration(r.lastPass.longestBatchMs)}, ${r.lastPass.roundFinished ? 'round finished' : `stopped (${r.lastPass.stoppedBecause}), round in progress`}` +
        ` — since the start: ${r.totalDeleted} deleted, ${r.totalTimedOut} timed out`,
    ];
  }
  const on = r.policy.maxCompleted !== null || r.policy.maxAgeMs !== null || r.policy.globalTimeoutMs !== null;
  return ['', r.summary, ...(on ? ['no retention pass has run yet'] : [])];
}

function recoveries(s: StatusOutput): string[] {
  if (!s.recentRecoveries.length) return [];
  return [
    '',
    'recent recoveries:',
    table(
      ['ID', 'EXECUTOR', 'REASON', 'BY', 'OUTCOME', 'RE-ENQUEUED', 'TOOK', 'LOCK', 'WHEN'],
      s.recentRecoveries.map((r) => [
        `#${r.id}`,
        r.executorId,
        r.reason,
        r.detectedBy,
        r.outcome ?? 'running',
        String(r.reenqueued),
        r.durationMs === null ? '-' : duration(r.durationMs),
        r.lockMode,
        ago(Date.parse(s.generatedAt) - Date.parse(r.startedAt)),
      ]),
    ),
  ];
}
