import { describe, expect, it } from 'vitest';
import { BatchSizer } from '../../shared/resume/batchSizer.js';

describe('BatchSizer: recovery batches sized by time under the cap', () => {
  it('starts at a quarter of the cap (the first batch is the slowest per row), never below the floor or above the cap', () => {
    expect(new BatchSizer(1000).size).toBe(250);
    expect(new BatchSizer(100).size).toBe(50);
    expect(new BatchSizer(10).size).toBe(10);
    expect(new BatchSizer(1).size).toBe(1);
  });

  it('grows at most 2× per full batch, up to the cap', () => {
    const s = new BatchSizer(1000, 50);
    s.observe(250, 1); // 12,500 rows would fit 50 ms
    expect(s.size).toBe(500);
    s.observe(500, 1);
    expect(s.size).toBe(1000);
    s.observe(1000, 1);
    expect(s.size).toBe(1000);
  });

  it('shrinks to what fits the target after a slow batch, at once', () => {
    const s = new BatchSizer(1000, 50);
    s.observe(250, 5);
    s.observe(500, 5);
    expect(s.size).toBe(1000);
    s.observe(1000, 200); // a busy moment: 4× the target
    expect(s.size).toBe(250);
    s.observe(250, 100_000);
    expect(s.size).toBe(50); // the floor
  });

  it('learns nothing from a short batch (the end of the range)', () => {
    const s = new BatchSizer(1000, 50);
    s.observe(3, 500);
    expect(s.size).toBe(250);
  });
});
