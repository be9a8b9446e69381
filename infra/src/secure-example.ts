/**
 * Writes the operators' example configuration (`infra/secure/nats-server.conf` and
 * `infra/secure/kafka-sasl-ssl.properties`) from the permission set in secure.ts:
 * `npm run secure:example`. infra/test/secure.test.ts fails when they are out of date.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from './paths';
import { exampleKafkaProperties, exampleNatsConfig } from './secure';

const dir = join(REPO_ROOT, 'infra', 'secure');
writeFileSync(join(dir, 'nats-server.conf'), exampleNatsConfig());
writeFileSync(join(dir, 'kafka-sasl-ssl.properties'), exampleKafkaProperties());
process.stderr.write(`[infra] wrote ${dir}/nats-server.conf and kafka-sasl-ssl.properties\n`);
