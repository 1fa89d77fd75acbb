import {
  dbosSupported,
  KIT_VERSION,
  kitCompatible,
  SUPPORTED_DBOS,
  SUPPORTED_DBOS_PYTHON,
} from '../../packages/executor/src/plane/index.js';
import { recordedKits, type RecordedKit } from '../db/doctor/kitFacts.js';
import { NEWEST_TESTED_DBOS_MIGRATION, readDbosSchemaVersion, TESTED_DBOS_VERSIONS } from '../dbos/schemaGuard.js';
import { capped, fail, pass, warn, type Check, type CheckResult } from './types.js';

type Verdict = Omit<CheckResult, 'id' | 'title' | 'doc'>;

/**
 * DBOS's version as the database records it (its system schema's migration): the plane writes DBOS's tables
 * directly and refuses a schema newer than DBOS_SCHEMA_MAX_VERSION at start; doctor says so before a deploy.
 * And each live kit's own word, recorded at registration (migration 0016): its version, which must speak
 * this plane's protocol (the same major.minor as the kit the plane was built with), and the DBOS its app
 * launched, which must be in the supported range.
 */
export const versionsCheck: Check = {
  id: 'versions',
  title: "DBOS's and the kits' versions in the supported range",
  async run({ db, config }) {
    const version = await readDbosSchemaVersion(db);
    const max = config.dbosSchemaMaxVersion;
    if (version > max)
      return fail(
        `DBOS's system schema "${config.dbosSchema}" is at migration ${version}, newer than ${max} (tested: migration ${NEWEST_TESTED_DBOS_MIGRATION}, @dbos-inc/dbos-sdk ${TESTED_DBOS_VERSIONS}); the plane refuses to start`,
        `upgrade afterlife, or check DBOS's recovery, cancel, fork and rewind statements are unchanged and set DBOS_SCHEMA_MAX_VERSION=${version}`,
      );
    const schema = `DBOS's system schema is at migration ${version} (accepted up to ${max}; tested with @dbos-inc/dbos-sdk ${TESTED_DBOS_VERSIONS})`;
    return kitsVerdict(await recordedKits(db, config.applicationName), schema);
  },
};

const RANGE = `>=${SUPPORTED_DBOS.min} <${SUPPORTED_DBOS.below}`;
const PY_RANGE = `dbos (Python) >=${SUPPORTED_DBOS_PYTHON.min} <${SUPPORTED_DBOS_PYTHON.below}`;

function kitsVerdict(kits: RecordedKit[], schema: string): Verdict {
  const describe = (k: RecordedKit) =>
    `executor ${k.executorId}: kit ${k.kitVersion ?? 'unrecorded'}, ${k.dbosSdk === 'python' ? 'dbos (Python)' : '@dbos-inc/dbos-sdk'} ${k.dbosVersion ?? 'unrecorded'}`;
  const badDbos = kits.filter((k) => k.dbosVersion !== undefined && !dbosSupported(k.dbosVersion, k.dbosSdk));
  const badKit = kits.filter((k) => k.kitVersion !== undefined && !kitCompatible(k.kitVersion));
  if (badDbos.length || badKit.length)
    return fail(
      `${badDbos.length + badKit.length} live kit(s) outside the supported versions (DBOS ${RANGE}, ${PY_RANGE}; kit ${KIT_VERSION.replace(/\.\d+$/, '.x')}, this plane's)`,
      `run @dbos-inc/dbos-sdk ${RANGE} (or ${PY_RANGE}) in the app, and the afterlife-executor release that matches this plane (${KIT_VERSION})`,
      capped([...badDbos, ...badKit.filter((k) => !badDbos.includes(k))].map(describe)),
    );
  const silent = kits.filter((k) => k.kitVersion === undefined || k.dbosVersion === undefined);
  if (silent.length)
    return warn(
      `${schema}; ${silent.length} of ${kits.length} live kit(s) recorded no version (or DBOS's could not be read)`,
      'upgrade the kits to one that records its versions at registration, and run `afterlife-plane migrate` (migration 0016)',
      capped(silent.map(describe)),
    );
  // Within the range, yet a DBOS whose queue runner the kit could not reach: recoveries never ask it to claim
  // now (docs/recovery.md, step 3), so the work it would take waits for its next queue poll.
  const unasked = kits.filter((k) => k.pollsOnRequest === false);
  if (unasked.length)
    return warn(
      `${schema}; ${unasked.length} of ${kits.length} live kit(s) cannot be asked to claim recovered work at once (their DBOS's queue runner is not where the kit looks): recovered work waits up to a queue poll longer there`,
      `run a tested @dbos-inc/dbos-sdk (${TESTED_DBOS_VERSIONS}) in the app, or upgrade afterlife-executor`,
      capped(unasked.map(describe)),
    );
  return pass(
    kits.length
      ? `${schema}; ${kits.length} live kit(s), each kit ${KIT_VERSION.replace(/\.\d+$/, '.x')} on DBOS ${RANGE} or ${PY_RANGE}`
      : schema,
    capped(kits.map(describe)),
  );
}
