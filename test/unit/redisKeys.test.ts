import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { heartbeatIndexKey, heartbeatKey } from '../../packages/executor/src/contract/heartbeat.js';
import { redisKey } from '../../packages/executor/src/contract/redisKeys.js';
import { sentinelKey } from '../../shared/reaper/evidence.js';

/** One builder for every Redis key (contract/redisKeys.ts): no module spells a `{prefix}:…` key by hand. */
const ROOT = join(import.meta.dirname, '../..');
const BUILDER = 'packages/executor/src/contract/redisKeys.ts';
const HAND_BUILT = /`\$\{[^}`]*[pP]refix[^}`]*\}:\$\{/;

function productModules(): string[] {
  return ['shared', 'functions', 'cli', 'packages/executor/src'].flatMap((dir) =>
    readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })
      .filter((d) => d.isFile() && d.name.endsWith('.ts'))
      .map((d) => relative(ROOT, join(d.parentPath, d.name))),
  );
}

describe('Redis keys', () => {
  it('are {prefix}:{app}:{kind}[:{id}], the prefix defaulting to afterlife', () => {
    expect(heartbeatKey('shop', 'exec-1')).toBe('afterlife:shop:hb:exec-1');
    expect(heartbeatKey('shop', 'exec-1', 'team')).toBe('team:shop:hb:exec-1');
    expect(heartbeatIndexKey('shop')).toBe('afterlife:shop:hbidx');
    expect(sentinelKey('shop', 'team')).toBe('team:shop:reaper:sentinel');
    expect(redisKey(undefined, 'shop', 'recover', 'exec-1')).toBe('afterlife:shop:recover:exec-1');
    expect(redisKey('team', 'shop', 'fork', 'wf-1')).toBe('team:shop:fork:wf-1');
  });

  it('are built by the contract alone', () => {
    expect(HAND_BUILT.test('const k = `${deps.keyPrefix}:${app}:recover:${id}`;')).toBe(true);
    const found = productModules().filter((f) => f !== BUILDER && HAND_BUILT.test(readFileSync(join(ROOT, f), 'utf8')));
    expect(found).toEqual([]);
  });
});
