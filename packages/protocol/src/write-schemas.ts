/** Write the protocol's JSON Schemas to schemas/protocol/ (package README, "Schemas and evolution"). */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PROTOCOL_SCHEMAS } from './schemas';

const SCHEMA_DIR = fileURLToPath(new URL('../../../schemas/protocol/', import.meta.url));

for (const [name, schema] of Object.entries(PROTOCOL_SCHEMAS)) {
  writeFileSync(join(SCHEMA_DIR, name), `${JSON.stringify(schema, null, 2)}\n`);
  console.log(`wrote ${join(SCHEMA_DIR, name)}`);
}
