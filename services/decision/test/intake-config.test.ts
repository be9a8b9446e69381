/**
 * The intake settings (`@vantage/ingest`'s `intakeProperties`, `jetstreamStalledMs`,
 * `rejectionLogIntervalMs`) are one schema: the indexer (`VANTAGE_INDEXER_*`) and the decision
 * service's local pools (`VANTAGE_DECISION_LOCAL_*`) take the same defaults, accept the same
 * values and refuse the same ones with the same message.
 */
import { describe, expect, it } from 'vitest';
import { indexerConfigSchema } from '@vantage/indexer';
import { loadConfig } from '@vantage/runtime';
import { decisionConfigSchema } from '../src/index';

const ROLES = { VANTAGE_DECISION_POOLS_EFFICIENT_MODEL: 'm-8b', VANTAGE_DECISION_POOLS_EFFICIENT_POOL: 'efficient', VANTAGE_DECISION_POOLS_CAPABLE_MODEL: 'm-70b', VANTAGE_DECISION_POOLS_CAPABLE_POOL: 'capable' };

// [indexer setting, decision setting, values tried ('!': the value must be refused)]; each set by its variable, VANTAGE_ and the path in snake case.
const CASES: [string, string, string[]][] = [
  ['indexer.queueDepth', 'decision.local.queueDepth', ['16', '!15', '65536', '!1.5', '!x']],
  ['indexer.applyBatch', 'decision.local.applyBatch', ['1', '!0', '512']],
  ['indexer.bookingTtlMs', 'decision.local.bookingTtlMs', ['1000', '!999', '300000']],
  ['indexer.workerTtlMs', 'decision.local.workerTtlMs', ['1000', '!999']],
  ['indexer.housekeepingMs', 'decision.local.housekeepingMs', ['50', '!49']],
  ['indexer.durableName', 'decision.local.durableName', ['', 'a_b-1', '!a.b', '!a b']],
  ['indexer.recovery.timeoutMs', 'decision.local.recovery.timeoutMs', ['100', '!99']],
  ['indexer.recovery.responsePort', 'decision.local.recovery.responsePort', ['0', '65535', '!65536', '!-1']],
  ['indexer.recovery.enabled', 'decision.local.recovery.enabled', ['false', '!maybe']],
  ['indexer.limits.ranksPerPool', 'decision.local.limits.ranksPerPool', ['4096', '!4097', '!0']],
  ['indexer.limits.heldDuringRestore', 'decision.local.limits.heldDuringRestore', ['16', '!15']],
  ['indexer.health.jetstreamStalledMs', 'decision.local.jetstreamStalledMs', ['100', '!99']],
  ['indexer.rejectionLogIntervalMs', 'decision.rejectionLogIntervalMs', ['0', '!-1']],
];

const variable = (path: string): string => `VANTAGE_${path.split('.').map((s) => s.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase()).join('_')}`;

/** The loaded value, or the CONFIG_INVALID message with the service's path and variable taken out. */
function outcome(load: () => unknown, pick: (cfg: never) => unknown, path: string, variable: string): unknown {
  try {
    return { value: pick(load() as never) };
  } catch (e) {
    return { error: (e as Error).message.replaceAll(path, '<path>').replaceAll(variable, '<var>') };
  }
}

describe('intake settings: one schema in both services', () => {
  it('has the same defaults', () => {
    const ix = loadConfig(indexerConfigSchema, { env: {}, defaults: { service: 'indexer' } }).indexer;
    const dc = loadConfig(decisionConfigSchema, { env: ROLES, defaults: { service: 'decision' } }).decision;
    const { queueDepth, applyBatch, bookingTtlMs, workerTtlMs, housekeepingMs, durableName, recovery, limits } = ix;
    expect({ queueDepth, applyBatch, bookingTtlMs, workerTtlMs, housekeepingMs, durableName }).toEqual({ queueDepth: 65536, applyBatch: 512, bookingTtlMs: 300_000, workerTtlMs: 60_000, housekeepingMs: 1000, durableName: '' });
    expect(dc.local).toMatchObject({ queueDepth, applyBatch, bookingTtlMs, workerTtlMs, housekeepingMs, durableName, recovery, limits, jetstreamStalledMs: ix.health.jetstreamStalledMs });
    expect([ix.health.jetstreamStalledMs, ix.rejectionLogIntervalMs, dc.rejectionLogIntervalMs]).toEqual([15_000, 10_000, 10_000]);
  });

  it.each(CASES.flatMap(([ixPath, dcPath, values]) => values.map((v) => [ixPath, dcPath, v] as const)))('%s / %s = %j: accepted or refused alike', (ixPath, dcPath, value) => {
    const refused = value.startsWith('!');
    const raw = refused ? value.slice(1) : value;
    const at = (path: string) => (cfg: Record<string, unknown>): unknown => path.split('.').reduce<unknown>((node, seg) => (node as Record<string, unknown>)[seg], cfg);
    const ix = outcome(() => loadConfig(indexerConfigSchema, { env: { [variable(ixPath)]: raw }, defaults: { service: 'indexer' } }), at(ixPath), ixPath, variable(ixPath));
    const dc = outcome(() => loadConfig(decisionConfigSchema, { env: { ...ROLES, [variable(dcPath)]: raw }, defaults: { service: 'decision' } }), at(dcPath), dcPath, variable(dcPath));
    expect(ix).toEqual(dc);
    expect(ix).not.toEqual({ value: undefined });
    expect(Object.keys(ix as object)).toEqual([refused ? 'error' : 'value']);
  });
});
