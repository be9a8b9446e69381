import { describe, expect, it } from 'vitest';
import { readJsonRows } from '../src/index';

describe('readJsonRows (the offline tools\' JSON Lines reader)', () => {
  it('gives every non-blank line as an object with its line, or a problem with its line', () => {
    const text = ['{"a":1}', '', '  ', '{"a":', '[1,2]', 'null', '{"b":"x"}\r', '7'].join('\n');
    const r = readJsonRows(text);
    expect(r.lines).toBe(6);
    expect(r.objects).toEqual([
      { line: 1, row: { a: 1 } },
      { line: 7, row: { b: 'x' } },
    ]);
    expect(r.problems.map((p) => [p.line, p.message.split(':')[0]])).toEqual([
      [4, 'not JSON'],
      [5, 'not a JSON object'],
      [6, 'not a JSON object'],
      [8, 'not a JSON object'],
    ]);
  });
});
