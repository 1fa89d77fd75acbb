import { describe, expect, it } from 'vitest';

/** Proves which Node runs the suite: `npm run test:node24` sets EXPECT_NODE_MAJOR=24. */
describe('runtime', () => {
  it(`runs on the expected Node major (${process.version})`, () => {
    console.info(`tests running on Node ${process.version}`);
    const expected = process.env.EXPECT_NODE_MAJOR;
    if (expected) expect(process.versions.node.split('.')[0]).toBe(expected);
    expect(Number(process.versions.node.split('.')[0])).toBeGreaterThanOrEqual(20);
  });
});
