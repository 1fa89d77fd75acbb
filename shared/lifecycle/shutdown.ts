/**
 * Ordered, idempotent shutdown for afterlife's own functions. Closers run in reverse registration order
 * (the pool was opened first, so it closes last); each is guarded so one failure doesn't skip the rest.
 * `signal` aborts at SIGTERM so long loops stop at their next batch boundary.
 */
type Closer = { name: string; fn: () => unknown };

export class Lifecycle {
  private readonly closers: Closer[] = [];
  private readonly controller = new AbortController();
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

  shutdown(onError: (name: string, err: unknown) => void = () => undefined, perStepMs = 3_000): Promise<void> {
    this.shutdownPromise ??= (async () => {
      this.controller.abort();
      for (const closer of [...this.closers].reverse()) {
        try {
          await withTimeout(Promise.resolve().then(closer.fn), perStepMs);
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
 * listeners added at import time run before its own, so holding the exit there buys the time to clean up.
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
 * immediate exit until cleanup finishes or the grace timer fires.
 */
export function installSignalHandlers(lifecycle: Lifecycle, graceMs = 8_000, log: (m: string) => void = () => undefined): void {
  if (processHandlersInstalled) return;
  processHandlersInstalled = true;
  for (const sig of ['SIGTERM', 'SIGINT'] as const) {
    process.once(sig, () => {
      log(`${sig}: shutting down`);
      const exit = holdExit();
      const timer = setTimeout(() => exit(), graceMs);
      void lifecycle.shutdown().finally(() => {
        clearTimeout(timer);
        exit();
      });
    });
  }
}
