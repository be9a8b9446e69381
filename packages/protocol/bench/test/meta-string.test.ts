import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { metaJson } from '../meta-string';

describe('the binary reply\'s trailing JSON', () => {
  it('metaJson writes exactly what JSON.stringify writes', () => {
    const num = fc.oneof(fc.double(), fc.integer(), fc.constantFrom(0, -0, NaN, Infinity, -Infinity, 1e21, 1e-7, 2 ** 53 + 2));
    fc.assert(
      fc.property(
        fc.string(),
        fc.option(fc.record({ name: fc.string(), params: fc.dictionary(fc.string(), num) })),
        fc.array(fc.string(), { maxLength: 3 }),
        (pool, policy, reasons) => {
          expect(metaJson(pool, policy, reasons)).toBe(JSON.stringify({ pool, policy, reasons }));
        },
      ),
      { numRuns: 2000 },
    );
    // Integer-like keys come first, as JSON.stringify orders them; Unicode and escapes survive.
    const policy = { name: 'kv_router:"lowest"\u2028é', params: { b: 1.5, 2: 3, a: NaN, '1': -0 } };
    expect(metaJson('p\n"ü', policy, ['event_gap', 'x"y'])).toBe(JSON.stringify({ pool: 'p\n"ü', policy, reasons: ['event_gap', 'x"y'] }));
  });
});
