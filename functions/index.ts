/**
 * Registers every function target; `functions-framework --target=<name>` serves any of them.
 * @module
 */

import './executorDeath/index.js';
import './drain/index.js';
import './reaper/index.js';
