// Discovery entries as Dynamo 1.6.1's mocker wrote them (test/fixtures/file-kv is a copy of a live
// DYN_FILE_KV directory: 2 workers plus one with 2 dp ranks), the file backend on a real directory,
// and the view's membership rules, with the faults a store can hand over.
import { cpSync, mkdtempSync, readFileSync, renameSync, rmSync, unlinkSync, writeFileSync, mkdirSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  DiscoveryView,
  fileDiscoveryStore,
  fileNameToKey,
  parseDiscoveryEntry,
  type DiscoveryChange,
  type DiscoveryEvent,
  type DiscoveryStore,
} from '../src/index';
import { keyToFilePath } from './file-layout';

const FIXTURE = join(__dirname, 'fixtures', 'file-kv');
const W_DP2 = 18329147160771148149n;
const W_A = 416501073076962504n;
const W_B = 11487316532418974185n;

function fixtureEntries(): DiscoveryChange[] {
  const out: DiscoveryChange[] = [];
  for (const bucket of readdirSync(join(FIXTURE, 'v1'))) {
    for (const name of readdirSync(join(FIXTURE, 'v1', bucket))) {
      out.push({ kind: 'put', key: fileNameToKey(`v1/${bucket}`, name)!, value: new Uint8Array(readFileSync(join(FIXTURE, 'v1', bucket, name))) });
    }
  }
  return out;
}
const find = (pred: (k: string) => boolean): DiscoveryChange & { kind: 'put' } => fixtureEntries().find((c) => pred(c.key)) as DiscoveryChange & { kind: 'put' };

/** A store fed by hand (the view's rules, without a file system). */
class HandStore implements DiscoveryStore {
  readonly backend = 'hand';
  push: (c: readonly DiscoveryChange[]) => void = () => {};
  constructor(private readonly initial: DiscoveryChange[]) {}
  async watch(_p: string, on: (c: readonly DiscoveryChange[], initial: boolean) => void): Promise<void> {
    this.push = (c) => on(c, false);
    on(this.initial, true);
  }
  async close(): Promise<void> {}
}

describe('parseDiscoveryEntry on the 1.6.1 entries', () => {
  it('model card: capacity fields, instance id above 2^63 exact', () => {
    const c = find((k) => k === 'v1/mdc/dynamo/backend/generate/fe5e363b119fb975');
    const r = parseDiscoveryEntry(c.key, c.value);
    expect(r).toMatchObject({
      ok: true,
      value: {
        kind: 'model_card',
        namespace: 'dynamo',
        component: 'backend',
        endpoint: 'generate',
        instanceId: W_DP2,
        modelName: 'mock',
        capacity: { blockSize: 64, totalKvBlocks: 64, maxNumSeqs: 256, maxNumBatchedTokens: 8192, dpStartRank: 0, dpSize: 2 },
        enableLocalIndexer: true,
        kvEventPublishing: true,
      },
    });
    // The key's hex is the same id (Dynamo does not zero-pad it).
    expect(W_DP2.toString(16)).toBe('fe5e363b119fb975');
    expect(W_A.toString(16)).toBe('5c7b584ed5244c8');
  });

  it('instance, event channel and event source (with its recovery target)', () => {
    const i = find((k) => k === 'v1/instances/dynamo/backend/generate/9f6b2586194e11e9');
    expect(parseDiscoveryEntry(i.key, i.value)).toMatchObject({ ok: true, value: { kind: 'instance', instanceId: W_B, transport: { kind: 'tcp' }, codec: 'msgpack' } });
    const ch = find((k) => k.startsWith('v1/event_channels/') && k.includes('/topic/kv-events/'));
    expect(parseDiscoveryEntry(ch.key, ch.value)).toMatchObject({
      ok: true,
      value: { kind: 'event_channel', topic: 'kv-events', transportKind: 'Nats', subjectPrefix: 'namespace.dynamo.component.backend.endpoint.generate' },
    });
    const src = find((k) => k === 'v1/event_sources/namespace/dynamo/component/backend/endpoint/generate/topic/kv-events/1b846dc080853d');
    const r = parseDiscoveryEntry(src.key, src.value);
    expect(r).toMatchObject({
      ok: true,
      value: {
        kind: 'event_source',
        topic: 'kv-events',
        publisherId: 7745431287137597n,
        workerId: W_DP2,
        dpRank: 1,
        recoveryTarget: { endpoint: 'worker_kv_query_source_1b846dc080853d', instanceId: W_DP2, codec: 'msgpack', transport: { kind: 'tcp' } },
      },
    });
  });

  it('a u64 above 2^53 written as a JSON number survives; past 2^64, negative, float or string ids are refused', () => {
    const card = (id: string): string =>
      `{"type":"Model","namespace":"n","component":"c","endpoint":"e","instance_id":${id},"card_json":{"kv_cache_block_size":16,"runtime_config":{}}}`;
    expect(parseDiscoveryEntry('v1/mdc/n/c/e/1', card('18446744073709551615'))).toMatchObject({ ok: true, value: { instanceId: 18446744073709551615n } });
    expect(parseDiscoveryEntry('v1/mdc/n/c/e/1', card('9007199254740993'))).toMatchObject({ ok: true, value: { instanceId: 9007199254740993n } });
    expect(parseDiscoveryEntry('v1/mdc/n/c/e/1', card('18446744073709551616'))).toMatchObject({ ok: false, code: 'out_of_range' });
    expect(parseDiscoveryEntry('v1/mdc/n/c/e/1', card('-1'))).toMatchObject({ ok: false, code: 'out_of_range' });
    expect(parseDiscoveryEntry('v1/mdc/n/c/e/1', card('1.5'))).toMatchObject({ ok: false, code: 'wrong_type' });
    expect(parseDiscoveryEntry('v1/mdc/n/c/e/1', card('"7"'))).toMatchObject({ ok: false, code: 'wrong_type' });
    // Defaults: no dp fields is one rank from 0; no capacity figures are unknown.
    expect(parseDiscoveryEntry('v1/mdc/n/c/e/1', card('1'))).toMatchObject({
      ok: true,
      value: { capacity: { blockSize: 16, totalKvBlocks: null, maxNumBatchedTokens: null, dpStartRank: 0, dpSize: 1 } },
    });
  });

  it('faults: truncated JSON, a wrong type, a type that does not match its bucket, a wildcard subject prefix; other buckets are ignored', () => {
    const c = find((k) => k.startsWith('v1/mdc/'));
    const text = new TextDecoder().decode(c.value);
    expect(parseDiscoveryEntry(c.key, text.slice(0, text.length / 2))).toMatchObject({ ok: false, code: 'truncated' });
    expect(parseDiscoveryEntry(c.key, text.replace('"kv_cache_block_size":64', '"kv_cache_block_size":"64"'))).toMatchObject({ ok: false, code: 'wrong_type' });
    expect(parseDiscoveryEntry(c.key, text.replace('"type":"Model"', '"type":"Endpoint"'))).toMatchObject({ ok: false, code: 'unknown_variant' });
    expect(parseDiscoveryEntry(c.key, text.replace(/"runtime_config":\{/, '"runtime_config":{"data_parallel_size":0,'))).toMatchObject({ ok: false });
    expect(parseDiscoveryEntry(c.key, '[1,2]')).toMatchObject({ ok: false, code: 'wrong_type' });
    expect(parseDiscoveryEntry(c.key, '{"type":"Model","type":"Model"}')).toMatchObject({ ok: false, code: 'malformed' });
    const ch = find((k) => k.startsWith('v1/event_channels/'));
    const chText = new TextDecoder().decode(ch.value).replace('"subject_prefix":"namespace.dynamo', '"subject_prefix":"namespace.>.dynamo');
    expect(parseDiscoveryEntry(ch.key, chText)).toMatchObject({ ok: false, code: 'malformed' });
    expect(parseDiscoveryEntry('v2/whatever/x', 'not json')).toEqual({ ok: true, value: { kind: 'other', key: 'v2/whatever/x' } });
  });
});

describe('DiscoveryView', () => {
  it('lists the workers (card and instance both present), their dp ranks, subject prefixes and publishers', async () => {
    const view = new DiscoveryView(new HandStore(fixtureEntries()), { namespace: 'dynamo', component: 'backend', endpoint: 'generate' });
    const events: DiscoveryEvent[] = [];
    view.subscribe((e) => events.push(e));
    await view.start();
    expect(view.workers().map((w) => w.instanceId)).toEqual([W_A, W_B, W_DP2]);
    expect(view.workers().find((w) => w.instanceId === W_DP2)?.capacity).toMatchObject({ dpStartRank: 0, dpSize: 2, maxNumBatchedTokens: 8192 });
    expect(view.subjectPrefixes()).toEqual(['namespace.dynamo.component.backend.endpoint.generate']);
    expect(view.publishers()).toHaveLength(4);
    expect(view.publisher(7745431287137597n)).toMatchObject({ workerId: W_DP2, dpRank: 1, topic: 'kv-events' });
    expect(view.publisher(1n)).toBeUndefined();
    expect(events.filter((e) => e.kind === 'worker_added')).toHaveLength(3);
    expect(view.counters).toMatchObject({ rejected: 0 });
  });

  it('another namespace sees none of them', async () => {
    const view = new DiscoveryView(new HandStore(fixtureEntries()), { namespace: 'other' });
    await view.start();
    expect(view.workers()).toHaveLength(0);
    expect(view.subjectPrefixes()).toHaveLength(0);
  });

  it('a deleted card or instance removes the worker; a bad update keeps the last good entry; re-adding adds it back', async () => {
    const store = new HandStore(fixtureEntries());
    const view = new DiscoveryView(store, { namespace: 'dynamo' });
    const events: DiscoveryEvent[] = [];
    view.subscribe((e) => events.push(e));
    await view.start();
    const card = find((k) => k === 'v1/mdc/dynamo/backend/generate/5c7b584ed5244c8');
    store.push([{ kind: 'put', key: card.key, value: new TextEncoder().encode('{"type":"Model", "trunc') }]);
    expect(view.workers().map((w) => w.instanceId)).toContain(W_A);
    expect(events.at(-1)).toMatchObject({ kind: 'rejected', key: card.key, code: 'truncated' });
    store.push([{ kind: 'delete', key: card.key }]);
    expect(view.workers().map((w) => w.instanceId)).toEqual([W_B, W_DP2]);
    expect(events.at(-1)).toMatchObject({ kind: 'worker_removed', worker: { instanceId: W_A } });
    store.push([card]);
    expect(view.workers().map((w) => w.instanceId)).toEqual([W_A, W_B, W_DP2]);
    store.push([{ kind: 'delete', key: 'v1/instances/dynamo/backend/generate/9f6b2586194e11e9' }]);
    expect(view.workers().map((w) => w.instanceId)).toEqual([W_A, W_DP2]);
    // A changed card (more blocks) is a change, not a remove and add.
    const bigger = new TextDecoder().decode(card.value).replace('"total_kv_blocks":64', '"total_kv_blocks":128');
    store.push([{ kind: 'put', key: card.key, value: new TextEncoder().encode(bigger) }]);
    expect(events.at(-1)).toMatchObject({ kind: 'worker_changed', worker: { capacity: { totalKvBlocks: 128 } }, previous: { capacity: { totalKvBlocks: 64 } } });
    expect(view.counters.rejected).toBe(1);
  });

  it('a listener that throws does not stop the others or the view', async () => {
    const view = new DiscoveryView(new HandStore(fixtureEntries()), { namespace: 'dynamo' });
    let seen = 0;
    view.subscribe(() => {
      throw new Error('boom');
    });
    view.subscribe(() => seen++);
    await view.start();
    expect(seen).toBeGreaterThan(0);
    expect(view.workers()).toHaveLength(3);
  });
});

describe('fileDiscoveryStore on a real directory', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });
  const tmp = (): string => {
    const d = mkdtempSync(join(tmpdir(), 'vantage-disc-'));
    dirs.push(d);
    return d;
  };
  const until = async (what: string, check: () => boolean, ms = 5000): Promise<void> => {
    const end = Date.now() + ms;
    while (!check()) {
      if (Date.now() > end) throw new Error(`timed out: ${what}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  };

  it('keys map to Dynamo file names and back', () => {
    const key = 'v1/instances/dynamo/backend/worker_kv_query_source_1b846dc080853d/fe5e363b119fb975';
    const p = keyToFilePath('/d', key);
    expect(p).toBe('/d/v1/instances/dynamo%2Fbackend%2Fworker%5Fkv%5Fquery%5Fsource%5F1b846dc080853d%2Ffe5e363b119fb975');
    expect(readdirSync(join(FIXTURE, 'v1', 'instances'))).toContain(p.slice('/d/v1/instances/'.length));
    expect(fileNameToKey('v1/instances', p.slice('/d/v1/instances/'.length))).toBe(key);
    expect(fileNameToKey('v1/mdc', 'bad%ZZ')).toBeUndefined();
  });

  it('initial listing, then puts, deletes, partial writes held back, a missing directory', async () => {
    const root = tmp();
    const dir = join(root, 'kv');
    const errors: Error[] = [];
    const store = fileDiscoveryStore(dir, { pollMs: 20, settleMs: 300 });
    const view = new DiscoveryView(store, { namespace: 'dynamo', onStoreError: (e) => errors.push(e) });
    const events: DiscoveryEvent[] = [];
    view.subscribe((e) => events.push(e));
    await view.start();
    expect(view.workers()).toHaveLength(0);
    expect(errors.some((e) => /does not exist/.test(e.message))).toBe(true);

    cpSync(FIXTURE, dir, { recursive: true });
    await until('three workers', () => view.workers().length === 3);
    expect(view.publishers()).toHaveLength(4);

    // A writer caught mid-write: half a card is not reported; the completed card is.
    const key = 'v1/mdc/dynamo/backend/generate/abc';
    const path = keyToFilePath(dir, key);
    const full = readFileSync(keyToFilePath(dir, 'v1/mdc/dynamo/backend/generate/5c7b584ed5244c8'), 'utf8').replace('416501073076962504', '2748');
    writeFileSync(path, full.slice(0, 100));
    writeFileSync(keyToFilePath(dir, 'v1/instances/dynamo/backend/generate/abc'), '{"type":"Endpoint","namespace":"dynamo","component":"backend","endpoint":"generate","instance_id":2748}');
    await new Promise((r) => setTimeout(r, 150));
    expect(view.counters.rejected).toBe(0);
    expect(view.workers()).toHaveLength(3);
    writeFileSync(path, full);
    await until('the fourth worker', () => view.workers().length === 4);
    expect(view.counters.rejected).toBe(0);

    // Bytes that stay broken past settleMs are reported (and rejected by the view, counted).
    writeFileSync(path, '{"type":"Model",');
    await until('the broken card counted', () => view.counters.rejected === 1, 3000);
    expect(view.workers()).toHaveLength(4); // the last good card stays

    // Atomic replace (write elsewhere, rename over) and delete.
    const tmpFile = join(dirname(path), '.tmp-card');
    writeFileSync(tmpFile, full.replace('"total_kv_blocks":64', '"total_kv_blocks":32'));
    renameSync(tmpFile, path);
    await until('the card changed', () => view.workers().find((w) => w.instanceId === 2748n)?.capacity.totalKvBlocks === 32);
    unlinkSync(path);
    await until('the worker removed', () => view.workers().length === 3);
    expect(events.some((e) => e.kind === 'worker_removed' && e.worker.instanceId === 2748n)).toBe(true);

    // The whole tree gone (all workers shut down) and back.
    rmSync(dir, { recursive: true, force: true });
    await until('no workers', () => view.workers().length === 0);
    mkdirSync(join(dir, 'v1'), { recursive: true });
    cpSync(FIXTURE, dir, { recursive: true });
    await until('workers back', () => view.workers().length === 3);
    await view.close();
  });
});
