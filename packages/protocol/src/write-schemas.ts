/**
 * Write the protocol's JSON Schemas to schemas/protocol/ (the published
 * contract). Run after changing schemas.ts:
 *   npx tsx packages/protocol/src/write-schemas.ts
 * The unit tests fail while the files differ from schemas.ts.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PROTOCOL_SCHEMAS } from './schemas';

export const SCHEMA_DIR = fileURLToPath(new URL('../../../schemas/protocol/', import.meta.url));

/** The exact bytes each schema file must hold. */
export function renderSchema(schema: unknown): string {
  return `${JSON.stringify(schema, null, 2)}\n`;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  for (const [name, schema] of Object.entries(PROTOCOL_SCHEMAS)) {
    writeFileSync(join(SCHEMA_DIR, name), renderSchema(schema));
    console.log(`wrote ${join(SCHEMA_DIR, name)}`);
  }
}
