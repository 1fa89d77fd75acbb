import { pythonToolchain } from '../../scripts/stack/pythonExecutor.js';

/**
 * The Python executors of the tests (scripts/stack/pythonExecutor.ts: a real DBOS for Python 2.30.0 app with
 * or without the Python kit), and the rule for a machine without the Python toolchain: a skip nobody can miss
 * on a developer's machine, a failure in CI (CI=true, or AFTERLIFE_REQUIRE_PYTHON=1 as .ci/run sets it).
 */
export {
  KIT_APP,
  PYTHON_KIT_SRC,
  type PythonExecutor,
  type PythonExecutorOptions,
  pythonToolchain,
  startPythonExecutor,
} from '../../scripts/stack/pythonExecutor.js';

/**
 * Whether to skip a Python suite here: never under CI (it throws there), otherwise with a warning nobody can
 * miss. Call at the top of a test file: `const noPython = pythonSkip('what this file proves')`.
 */
export function pythonSkip(what: string): boolean {
  const t = pythonToolchain();
  if (typeof t !== 'string') return false;
  if (process.env.CI === 'true' || process.env.AFTERLIFE_REQUIRE_PYTHON === '1')
    throw new Error(`CI: the Python toolchain is required for ${what}: ${t}`);
  console.warn(`\n!!! SKIPPED: ${what}: no Python toolchain: ${t}\n!!! (CI fails here instead)\n`);
  return true;
}
