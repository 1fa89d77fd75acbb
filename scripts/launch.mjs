// `npm start` / `npm run demo`: build only when a source is newer than the build, then run the built script in
// this process (so Ctrl-C reaches it as before), telling it when `npm start` began so the time to ready it
// prints includes npm's launch and the build. Plain JavaScript: it must run before anything is compiled.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const SCRIPTS = { start: 'dist/scripts/start.js', demo: 'dist/scripts/demo.js' };
// What tsconfig.build.json compiles, the migrations the build copies, and what changes the output.
const SOURCES = [
  'functions',
  'shared',
  'packages/executor/src',
  'cli',
  'scripts',
  'examples',
  'bench',
  'test/helpers/forwarder.ts',
  'test/helpers/dropper.ts',
];
const CONFIGS = ['tsconfig.json', 'tsconfig.build.json', 'package.json', 'package-lock.json'];
// Every build rewrites these (tsc emits every file; not incremental): the oldest is when the build ran.
const OUTPUTS = ['dist/functions/index.js', 'dist/cli/index.js', 'dist/scripts/start.js', 'dist/scripts/demo.js'];

const target = process.argv[2];
const script = SCRIPTS[target];
if (!script) {
  process.stderr.write(`usage: node scripts/launch.mjs ${Object.keys(SCRIPTS).join('|')} [args]\n`);
  process.exit(2);
}
const began = npmStartedAt() ?? Date.now() - Math.round(process.uptime() * 1000);

const stale = staleBecause();
if (stale) {
  process.stderr.write(`  … building (${stale})\n`);
  const built = spawnSync(process.platform === 'win32' ? 'npm.cmd' : 'npm', ['run', '--silent', 'build'], { cwd: ROOT, stdio: 'inherit' });
  if (built.status !== 0) process.exit(built.status ?? 1);
} else {
  process.stderr.write('  … the build is current: not rebuilding\n');
}
process.env.AFTERLIFE_START_BEGAN_MS = String(began);
process.argv.splice(2, 1);
await import(pathToFileURL(join(ROOT, script)).href);

/** Why the build is out of date (a newer source, a missing output), or undefined when it is current. */
function staleBecause() {
  const built = OUTPUTS.map((f) => (existsSync(join(ROOT, f)) ? statSync(join(ROOT, f)).mtimeMs : undefined));
  if (built.some((t) => t === undefined)) return 'no build yet';
  const at = Math.min(...built);
  for (const f of CONFIGS) if (existsSync(join(ROOT, f)) && statSync(join(ROOT, f)).mtimeMs > at) return `${f} changed`;
  for (const dir of SOURCES) {
    const newer = newerIn(join(ROOT, dir), at);
    if (newer) return `${newer.slice(ROOT.length + 1)} changed`;
  }
  return undefined;
}

function newerIn(dir, than) {
  if (!existsSync(dir)) return undefined;
  if (!statSync(dir).isDirectory()) return statSync(dir).mtimeMs > than ? dir : undefined;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) {
      if (e.name === 'node_modules') continue;
      const found = newerIn(p, than);
      if (found) return found;
    } else if (/\.(ts|sql|json)$/.test(e.name) && statSync(p).mtimeMs > than) {
      return p;
    }
  }
  return undefined;
}

/**
 * When the `npm` process that ran this script started (Linux's /proc; elsewhere undefined and this process's
 * own start counts): npm itself takes a few hundred milliseconds to get here.
 */
function npmStartedAt() {
  try {
    // Start times in clock ticks since boot (USER_HZ, 100 on Linux), compared with this process's own, whose
    // wall-clock start Node knows: no boot time (whole seconds) enters the sum.
    const stat = (pid) => {
      const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
      return { ppid: Number(f[1]), startTicks: Number(f[19]) };
    };
    const self = stat('self');
    let npmTicks;
    for (let pid = process.ppid, hops = 0; pid > 1 && hops < 3; hops++) {
      const p = stat(pid);
      // npm's command line, or the title npm gives itself ("npm start").
      if (/(^|[/\0])npm(-cli\.js)?([\0 ]|$)/.test(readFileSync(`/proc/${pid}/cmdline`, 'utf8'))) npmTicks = p.startTicks;
      pid = p.ppid;
    }
    if (npmTicks === undefined || !Number.isFinite(npmTicks) || npmTicks > self.startTicks) return undefined;
    return Math.round(Date.now() - process.uptime() * 1000 - (self.startTicks - npmTicks) * 10);
  } catch {
    return undefined;
  }
}
