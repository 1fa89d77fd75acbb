import type { Db } from '../db/pool.js';
import { recordKitFacts, recordKitRefusal } from '../db/queries/kitFacts.js';
import type { Logger } from '../log.js';
import { KIT_VERSION } from '../version.js';
import { launchedDbosVersion } from './dbosVersion.js';

/**
 * Records what the plane's doctor checks about this kit on its registry row: the kit's version,
 * the DBOS the app launched, and the lease the server has in force on the liveness session — once attached,
 * and again whenever the liveness session reconnects (a new session may inherit another lease). Never in
 * the way: a failed write is one line, and a schema from before migration 0016 one WARNING naming the fix.
 */
export class KitFacts {
  private leaseMs: number | undefined;
  private attached = false;
  private warnedSchema = false;
  private readonly dbosVersion = launchedDbosVersion();

  constructor(
    private readonly db: Db,
    private readonly row: { applicationName: string; executorId: string; incarnation: string },
    private readonly log: Logger,
    /** Whether recoveries may ask this kit to poll its queues now (pollNow.ts): they choose among those that can. */
    private readonly pollsOnRequest: boolean,
  ) {}

  /** The lease the liveness session reported (every connect); recorded at once when already attached. */
  lease(serverLeaseMs: number): void {
    this.leaseMs = serverLeaseMs;
    if (this.attached) void this.record();
  }

  /** Registration is done: record now. */
  ready(): Promise<void> {
    this.attached = true;
    return this.record();
  }

  /** The attach is refused (`reason`): said in the registry's place, bounded, never in the way of the exit. */
  async refused(reason: string, detail: string): Promise<void> {
    const write = recordKitRefusal(this.db, { ...this.row, reason, detail });
    await Promise.race([write, new Promise((r) => setTimeout(r, 1_500).unref())]).catch((err: unknown) =>
      this.log.debug('recording the refusal failed', { err }),
    );
  }

  private async record(): Promise<void> {
    try {
      await recordKitFacts(this.db, {
        applicationName: this.row.applicationName,
        executorId: this.row.executorId,
        facts: {
          incarnation: this.row.incarnation,
          kitVersion: KIT_VERSION,
          dbosVersion: this.dbosVersion,
          livenessLeaseMs: this.leaseMs,
          pollsOnRequest: this.pollsOnRequest,
        },
      });
    } catch (err) {
      if ((err as { code?: unknown }).code === '42703') {
        if (this.warnedSchema) return;
        this.warnedSchema = true;
        this.log.warn(
          "afterlife's schema predates migration 0016: this kit's versions and lease are not recorded, so doctor cannot check them; run `afterlife-plane migrate`",
          { event: 'kit_facts_unrecorded' },
        );
      } else {
        this.log.debug('recording the kit facts failed; the next reconnect retries', { err });
      }
    }
  }
}
