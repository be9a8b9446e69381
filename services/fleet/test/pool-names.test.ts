/**
 * Pool names are one NATS subject token, checked by @vantage/protocol's one pattern wherever a
 * service takes them: the fleet's `--pools` option and its configuration, the indexer's and the
 * decision service's configurations. A name the protocol refuses is refused everywhere, and one
 * it accepts is accepted.
 */
import { describe, expect, it } from 'vitest';
import { decisionConfigSchema } from '@vantage/decision';
import { indexerConfigSchema } from '@vantage/indexer';
import { isValidPoolName } from '@vantage/protocol';
import { loadConfig } from '@vantage/runtime';
import { fleetConfigSchema } from '../src/index';
import { parsePools } from '../src/pools';

const NAMES = ['efficient', 'pool_2-b', 'x'.repeat(64), '', 'x'.repeat(65), 'a.b', 'a b', 'a*', 'ünï'];

const accepts = (load: () => unknown): boolean => {
  try {
    load();
    return true;
  } catch {
    return false;
  }
};

describe('pool names: one check everywhere', () => {
  it.each(NAMES)('%j is accepted exactly where the protocol accepts it', (name) => {
    const valid = isValidPoolName(name);
    expect(accepts(() => parsePools(`${name}:64,other:64`))).toBe(valid);
    const pools = JSON.stringify([{ name }]);
    expect(accepts(() => loadConfig(fleetConfigSchema, { env: { VANTAGE_FLEET_POOLS: pools }, defaults: { service: 'fleet' } }))).toBe(valid);
    expect(accepts(() => loadConfig(indexerConfigSchema, { env: { VANTAGE_INDEXER_POOLS: pools }, defaults: { service: 'indexer' } }))).toBe(valid);
    const decision = { VANTAGE_DECISION_POOLS_EFFICIENT_MODEL: 'm-8b', VANTAGE_DECISION_POOLS_EFFICIENT_POOL: name, VANTAGE_DECISION_POOLS_CAPABLE_MODEL: 'm-70b', VANTAGE_DECISION_POOLS_CAPABLE_POOL: 'capable' };
    expect(accepts(() => loadConfig(decisionConfigSchema, { env: decision, defaults: { service: 'decision' } }))).toBe(valid);
  });
});
