import { existsSync } from 'node:fs';
import { freePort, readyOrStop, spawnManaged } from './proc.js';

/**
 * The Pub/Sub emulator (the real one, Java) when installed. Started directly rather than through gcloud,
 * so no gcloud configuration is written on the developer's machine.
 */
export const DEFAULT_EMULATOR_BIN = '/usr/lib/google-cloud-sdk/platform/pubsub-emulator/bin/cloud-pubsub-emulator';

export function emulatorBinary(env: Record<string, string | undefined> = process.env): string | undefined {
  const bin = env.PUBSUB_EMULATOR_BIN || DEFAULT_EMULATOR_BIN;
  return existsSync(bin) ? bin : undefined;
}

export interface StackEmulator {
  host: string;
  stop(): Promise<void>;
}

export async function startEmulator(bin: string, signal?: AbortSignal): Promise<StackEmulator> {
  const port = await freePort();
  const proc = spawnManaged('pubsub-emulator', bin, ['--host=127.0.0.1', `--port=${port}`]);
  await readyOrStop(proc, proc.waitForLine(/Server started/, 30_000), signal, 3_000);
  return { host: `127.0.0.1:${port}`, stop: () => proc.stop(3_000) };
}
