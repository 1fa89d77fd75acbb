import { describe, expect, it } from 'vitest';
import { heartbeatPattern } from '../../packages/executor/src/contract/heartbeat.js';

/** The heartbeat SCAN pattern is built from configured names, so their glob characters must not widen it. */
describe('heartbeat scan pattern', () => {
  it('the heartbeat scan pattern escapes the prefix as well as the application', () => {
    expect(heartbeatPattern('app', 'af*')).toBe('af\\*:app:hb:*');
  });
});
