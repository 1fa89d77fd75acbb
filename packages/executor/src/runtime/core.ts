import type { Db } from '../db/pool.js';
import type { ExecutorState } from '../db/queries/executors.js';
import type { Publisher } from '../events/publish.js';
import type { Logger } from '../log.js';
import type { DbosApp } from './dbosInternals.js';
import type { ExecutorKitOptions } from './options.js';
import type { KitLifecycle } from './state.js';

/** What the kit's modules (shutdown, drain, hand-over) share of the one kit they belong to. */
export interface KitCore {
  readonly executorId: string;
  readonly applicationName: string;
  readonly applicationVersion: string;
  /** This process start of the executor ID (random, made at attach): what the registry and fencing name. */
  readonly incarnation: string;
  readonly options: ExecutorKitOptions;
  readonly log: Logger;
  readonly db: Db;
  readonly app: DbosApp;
  readonly publisher: Publisher | undefined;
  /** The kit's one lifecycle: every phase change goes through its transitions (state.ts). */
  readonly lifecycle: KitLifecycle;
  /** Resolves on a second signal: skip the wait. */
  readonly fastPathRequested: Promise<void>;
  beat(): Promise<void>;
  registry(state: ExecutorState, reason?: string): Promise<void>;
  markDrained(): void;
  close(left?: (capMs: number) => number): Promise<void>;
}

/** The share of a deadline a step may take: at most `capMs`, never past the deadline, never zero. */
export type Left = (capMs: number) => number;
export const noDeadline: Left = (c) => c;
