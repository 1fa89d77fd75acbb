import { setTimeout as delay } from 'node:timers/promises';
import { attachExecutor, executorOptionsFromEnv } from 'afterlife-plane/executor';
import './main.js';

/**
 * Test variant of main.ts: the kit attaches AGENT_ATTACH_DELAY_MS (default 2 s) after DBOS.launch(), as in an
 * app that does other startup work first. Run with AFTERLIFE_KIT=off so that main.ts does not attach while
 * loading. Meanwhile DBOS is already running: its launch recovery has re-enqueued the PENDING work of this
 * executor ID, and any live process with the same ID may claim it before this one registers (issue 30).
 */
await delay(Number(process.env.AGENT_ATTACH_DELAY_MS ?? 2_000));
await attachExecutor(executorOptionsFromEnv(process.env));
