import { errorMessage } from '../errors.js';
/**
 * Ordered, idempotent shutdown for afterlife's own functions. On shutdown the abort signal fires (long
 * loops stop at their next batch boundary), tracked work is awaited so it can release its lock and write
 * its audit, and only then do the closers run, in reverse registration order (the pool was opened first,
 * so it closes last). Every step is guarded and bounded, so one failure or hang doesn't skip the rest.
 */
type Closer = { name: string; fn: () => unknown };

export interface ShutdownOptions {
  onError?: (name: string, err: unknown) => void;
  /** Bound on each closer. */
  perStepMs?: number;
  /** Bound on waiting for tracked work to reach its batch boundary. */
  drainMs?: number;
}

export class Lifecycle {
  private readonly closers: Closer[] = [];
  private readonly controller = new AbortController();
  private readonly inFlight = new Set<Promise<void>>();
  private shutdownPromise: Promise<void> | undefined;

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get shuttingDown(): boolean {
    return this.controller.signal.aborted;
  }

  onShutdown(name: string, fn: () => unknown): void {
    this.closers.push({ name, fn });
  }

  /** Work that must finish (or stop at a boundary) before the connections it uses are closed. */
  track<T>(work: Promise<T>): Promise<T> {
    const settled = work.then(
      () => undefined,
      () => undefined,
    );
    this.inFlight.add(settled);
    void settled.finally(() => this.inFlight.delete(settled));
    return work;
  }

  shutdown(opts: ShutdownOptions = {}): Promise<void> {
    const onError = opts.onError ?? (() => undefined);
    this.shutdownPromise ??= (async () => {
      this.controller.abort();
      if (this.inFlight.size) {
        await withTimeout(Promise.all([...this.inFlight]), opts.drainMs ?? 5_000).catch((err: unknown) => onError('in-flight work', err));
      }
      for (const closer of [...this.closers].reverse()) {
        try {
          await withTimeout(Promise.resolve().then(closer.fn), opts.perStepMs ?? 3_000);
        } catch (err) {
          onError(closer.name, err);
        }
      }
    })();
    return this.shutdownPromise;
  }
}

/** Rejects after `ms`; the timer never keeps the process alive. */
export function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
      timer.unref();
    }),
  ]).finally(() => clearTimeout(timer));
}

let processHandlersInstalled = false;

/**
 * Swallows `process.exit` until the returned function is called. functions-framework calls process.exit()
 * synchronously from its own SIGTERM listener (invoker.ts, ErrorHandler.register) and offers no hook;
 * listeners prepended to its own run first, so holding the exit there buys the time to clean up.
 * The first code asked for is kept and used when we really exit.
 */
export function holdExit(): (code?: number) => void {
  if (heldExit) return heldExit;
  const realExit = process.exit.bind(process);
  let requested: number | undefined;
  process.exit = ((code?: number | string | null) => {
    requested ??= typeof code === 'number' ? code : undefined;
  }) as typeof process.exit;
  heldExit = (code?: number) => realExit(code ?? requested ?? 0);
  return heldExit;
}
let heldExit: ((code?: number) => void) | undefined;

/**
 * Runs `lifecycle.shutdown()` on SIGTERM/SIGINT before the process exits, deferring functions-framework's
 * immediate exit until cleanup finishes or the grace timer fires. The listeners are prepended, so they run
 * before the framework's even when installed after it started listening (e.g. lazily, on a first request).
 */
export function installSignalHandlers(lifecycle: Lifecycle, graceMs = 8_000, log: (m: string) => void = () => undefined): void {
  if (processHandlersInstalled) return;
  processHandlersInstalled = true;
  for (const sig of ['SIGTERM', 'SIGINT'] as const) {
    process.prependOnceListener(sig, () => {
      log(`${sig}: shutting down`);
      const exit = holdExit();
      const timer = setTimeout(() => {
        log('shutdown grace over: exiting');
        exit();
      }, graceMs);
      const drainMs = Math.max(0, graceMs - 3_000);
      void lifecycle
        .shutdown({
          drainMs,
          onError: (name, err) => log(`shutdown step ${name} failed: ${errorMessage(err)}`),
        })
        .finally(() => {
          clearTimeout(timer);
          log('shutdown complete');
          exit();
        });
    });
  }
}
