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

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
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
 * Runs `lifecycle.shutdown()` on SIGTERM/SIGINT before the process exits. functions-framework calls
 * process.exit() synchronously from its own listener (invoker.ts, ErrorHandler.register); listeners added
 * at import time run first, so we defer that exit until cleanup finishes or the grace timer fires.
 */
export function installSignalHandlers(lifecycle: Lifecycle, graceMs = 8_000, log: (m: string) => void = () => undefined): void {
  if (processHandlersInstalled) return;
  processHandlersInstalled = true;
  for (const sig of ['SIGTERM', 'SIGINT'] as const) {
    process.once(sig, () => {
      log(`${sig}: shutting down`);
      const realExit = process.exit.bind(process);
      process.exit = ((code?: number) => {
        exitCode = code ?? exitCode;
      }) as typeof process.exit;
      let exitCode: number | undefined = 0;
      const timer = setTimeout(() => realExit(exitCode), graceMs);
      void lifecycle.shutdown().finally(() => {
        clearTimeout(timer);
        realExit(exitCode);
      });
    });
  }
}
