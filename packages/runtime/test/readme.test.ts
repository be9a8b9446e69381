// The README's error table is the catalogue's documentation; keep them identical.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../src/errors';

describe('README error table', () => {
  it('lists every code with its status, retryable flag, label and description', () => {
    const readme = readFileSync(join(import.meta.dirname, '..', 'README.md'), 'utf8');
    const rows = readme
      .split('\n')
      .filter((l) => /^\| `[A-Z_]+` \| \d+ \|/.test(l))
      .map((l) => l.trim());
    const expected = Object.entries(ERROR_CODES).map(
      ([code, i]) => `| \`${code}\` | ${i.status} | ${i.retryable ? 'yes' : 'no'} | \`${i.label}\` | ${i.description} |`,
    );
    expect(rows).toEqual(expected);
  });
});
