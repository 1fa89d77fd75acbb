/**
 * Which JSON logger, by measurement: the cost of one line for the sink logger (makeLogger + formatLogLine,
 * masking included), the kit's hand-written Cloud Logging logger (consoleLogger, issue 28: no pino in an
 * app), pino with afterlife's Cloud Logging options (the plane's pinoConsoleLogger, the same lines), and
 * pino with Google's own @google-cloud/pino-logging-gcp-config; plus what
 * importing each costs a cold start. Lines go to a sink that drops them (no I/O in the figure).
 *
 *   npm run bench:logger -- --lines 200000
 */
import { execFileSync } from 'node:child_process';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { createGcpLoggingPinoConfig } from '@google-cloud/pino-logging-gcp-config';
import { consoleLogger, formatLogLine, type Logger, makeLogger, maskSecrets } from '../packages/executor/src/log.js';
import { pinoConsoleLogger } from '../shared/log/pinoLogger.js';

const { values } = parseArgs({ options: { lines: { type: 'string', default: '200000' } } });
const N = Number(values.lines);
let bytes = 0;
const sink = {
  write: (s: string) => {
    bytes += s.length;
    return true;
  },
};

// A quiet-tick summary (the commonest idle line) and a short event line.
const summaryFields = {
  event: 'reaper_ticks',
  ticks: 240,
  eventful: 0,
  failed: 0,
  slowestMs: 12.5,
  slowestTick: 117,
  meanMs: 3.1,
  candidates: 0,
  alive: 3,
  windowMs: 60_000,
};
const shortFields = { event: 'executor_dead', executorId: 'exec-1', reason: 'heartbeat lapsed' };

function perLine(log: Logger): { summaryNs: number; shortNs: number } {
  const time = (fields: Record<string, unknown>) => {
    for (let i = 0; i < 5_000; i++) log.info('warm-up', fields);
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < N; i++) log.info('reaper ticks in the last minute', fields);
    return Number(process.hrtime.bigint() - t0) / N;
  };
  return { summaryNs: time(summaryFields), shortNs: time(shortFields) };
}

const base = { component: 'afterlife', fn: 'reaper', holder: 'reaper@host:123', dryRun: false };
const handWritten = makeLogger((line) => sink.write(`${formatLogLine(line)}\n`), base, 'INFO');
const kit = consoleLogger(base, 'INFO', { destination: sink, labels: { 'afterlife-app': 'demo' } });
const ours = pinoConsoleLogger(base, 'INFO', { destination: sink, labels: { 'afterlife-app': 'demo' } });
const google = pino(
  createGcpLoggingPinoConfig(
    { serviceContext: { service: 'reaper' }, traceGoogleCloudProjectId: '', inihibitDiagnosticMessage: true },
    { hooks: { streamWrite: (s: string) => maskSecrets(s, 'json') } },
  ),
  sink as pino.DestinationStream,
).child(base);
const googleLogger: Logger = {
  debug: (m, f) => google.debug(f ?? {}, m),
  info: (m, f) => google.info(f ?? {}, m),
  notice: (m, f) => google.info(f ?? {}, m),
  warn: (m, f) => google.warn(f ?? {}, m),
  error: (m, f) => google.error(f ?? {}, m),
  child: () => googleLogger,
};

const importMs = (mod: string) => {
  const out = execFileSync(
    process.execPath,
    ['-e', `const t=performance.now();require(${JSON.stringify(mod)});process.stdout.write(String(performance.now()-t))`],
    { encoding: 'utf8' },
  );
  return Math.round(Number(out));
};

const rows: Array<[string, { summaryNs: number; shortNs: number }, number | string]> = [
  ['sink logger (makeLogger + formatLogLine)', perLine(handWritten), 0],
  ['kit: hand-written Cloud Logging lines (consoleLogger)', perLine(kit), 0],
  ['plane: pino + afterlife cloudLogging options (pinoConsoleLogger)', perLine(ours), importMs('pino')],
  ['pino + @google-cloud/pino-logging-gcp-config', perLine(googleLogger), importMs('@google-cloud/pino-logging-gcp-config')],
];
console.log(`lines per case: ${N}; load: ${execFileSync('uptime', { encoding: 'utf8' }).trim()}`);
console.log('| logger | summary line (ns) | short line (ns) | import (ms) |');
console.log('|---|---|---|---|');
for (const [name, r, imp] of rows) console.log(`| ${name} | ${Math.round(r.summaryNs)} | ${Math.round(r.shortNs)} | ${imp} |`);
if (bytes === 0) throw new Error('nothing written');
