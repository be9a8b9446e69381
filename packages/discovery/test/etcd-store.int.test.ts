/**
 * The etcd discovery store against a real etcd (a private one per file, `ownEtcd`): the initial
 * listing, puts and deletes delivered byte for byte, keys outside the prefix ignored and keys that
 * are not UTF-8 refused without losing the others, a lease expiring as deletes, and, the point of
 * the revision bookkeeping, a dropped connection, a compaction while disconnected and a restart of
 * etcd mid-watch, after each of which the store has delivered exactly etcd's own history (nothing
 * missing, nothing twice) or, where etcd compacted it, exactly the difference to its state.
 *
 * Connections are cut with a TCP relay on 127.0.0.1 between the store and etcd: a fault injector,
 * not a stand-in (every byte goes to the real server).
 */
import { createServer, Socket, type Server } from 'node:net';
import { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { etcdDiscoveryStore, type DiscoveryChange, type EtcdDiscoveryStore } from '@vantage/discovery';
import { eventually, ownEtcd, uniqueName } from '@vantage/testkit';

type Etcd = Awaited<ReturnType<typeof ownEtcd>>;

/** What a test writer did, with the revision etcd gave it: the ground truth to compare against. */
interface Op {
  readonly rev: bigint;
  readonly change: DiscoveryChange;
}

class Recorder {
  readonly initial: DiscoveryChange[] = [];
  readonly changes: DiscoveryChange[] = [];
  readonly errors: Error[] = [];
  initialCalls = 0;
  readonly onChanges = (cs: readonly DiscoveryChange[], initial: boolean): void => {
    if (initial) {
      this.initialCalls++;
      this.initial.push(...cs);
    } else this.changes.push(...cs);
  };
  readonly onError = (e: Error): void => {
    this.errors.push(e);
  };
  /** The key -> value state the delivered changes add up to. */
  state(): Map<string, string> {
    const m = new Map<string, string>();
    for (const c of [...this.initial, ...this.changes]) {
      if (c.kind === 'put') m.set(c.key, Buffer.from(c.value).toString('utf8'));
      else m.delete(c.key);
    }
    return m;
  }
}

const text = (c: DiscoveryChange): string => (c.kind === 'put' ? `put ${c.key}=${Buffer.from(c.value).toString('utf8')}` : `delete ${c.key}`);

async function put(client: Etcd3, key: string, value: string, ops?: Op[]): Promise<void> {
  const r = await client.put(key).value(value).exec();
  ops?.push({ rev: BigInt(r.header.revision), change: { kind: 'put', key, value: Buffer.from(value) } });
}

async function del(client: Etcd3, key: string, ops?: Op[]): Promise<void> {
  const r = await client.delete().key(key).exec();
  expect(r.deleted).toBe('1');
  ops?.push({ rev: BigInt(r.header.revision), change: { kind: 'delete', key } });
}

/** etcd's state under a prefix, read directly. */
async function etcdState(client: Etcd3, prefix: string): Promise<Map<string, string>> {
  const all = await client.getAll().prefix(prefix).strings();
  return new Map(Object.entries(all));
}

/** A TCP relay 127.0.0.1:port -> etcd that can drop every connection and refuse new ones. */
async function relay(targetPort: number): Promise<{ url: string; cut: () => void; restore: () => void; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  let open = true;
  const server: Server = createServer((inbound) => {
    if (!open) {
      inbound.destroy();
      return;
    }
    const outbound = new Socket();
    sockets.add(inbound);
    sockets.add(outbound);
    const drop = (): void => {
      inbound.destroy();
      outbound.destroy();
      sockets.delete(inbound);
      sockets.delete(outbound);
    };
    inbound.on('error', drop).on('close', drop);
    outbound.on('error', drop).on('close', drop);
    outbound.connect(targetPort, '127.0.0.1', () => {
      inbound.pipe(outbound);
      outbound.pipe(inbound);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const addr = server.address();
  if (addr === null || typeof addr === 'string') throw new Error('relay has no port');
  return {
    url: `http://127.0.0.1:${addr.port}`,
    cut: () => {
      open = false;
      for (const s of sockets) s.destroy();
      sockets.clear();
    },
    restore: () => {
      open = true;
    },
    close: () =>
      new Promise<void>((r) => {
        open = false;
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

describe('etcd discovery store (real etcd)', () => {
  let etcd: Etcd;
  let writer: Etcd3;
  const stores: EtcdDiscoveryStore[] = [];
  const open = (s: EtcdDiscoveryStore): EtcdDiscoveryStore => {
    stores.push(s);
    return s;
  };

  beforeAll(async () => {
    etcd = await ownEtcd();
    writer = new Etcd3({ hosts: etcd.endpoint });
  });
  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close()));
    writer?.close();
    await etcd?.cleanup();
  });

  it('lists what is there, then delivers puts and deletes under the prefix byte for byte; refuses keys that are not UTF-8', async () => {
    const p = `${uniqueName('v1')}/`;
    await put(writer, `${p}mdc/a`, '{"instance_id":18446744073709551615}');
    await put(writer, `${p}instances/b`, 'é ü 中');
    await put(writer, `${p.slice(0, -1)}x/outside`, 'not under the prefix'); // same leading bytes, not the prefix
    await writer.put(Buffer.concat([Buffer.from(`${p}bad/`), Buffer.of(0xff, 0xfe)])).value('x').exec();

    const rec = new Recorder();
    const store = open(etcdDiscoveryStore({ endpoints: [etcd.endpoint], pageSize: 2 })); // pages of 2: the listing spans pages
    await store.watch(p, rec.onChanges, rec.onError);
    expect(store.backend).toBe('etcd');
    expect(rec.initialCalls).toBe(1);
    expect(rec.initial.map(text).sort()).toEqual([`put ${p}instances/b=é ü 中`, `put ${p}mdc/a={"instance_id":18446744073709551615}`]);
    expect(store.stats().rejectedKeys.key_not_utf8).toBe(1);
    expect(rec.errors.map((e) => e.message)).toEqual([expect.stringMatching(/^etcd key is not valid UTF-8: ".*\/bad\/\ufffd\ufffd" \(\d+ bytes: [0-9a-f]+fffe\)$/)]);

    const ops: Op[] = [];
    await put(writer, `${p}mdc/c`, 'one', ops);
    await put(writer, `${p}mdc/c`, 'two', ops);
    await del(writer, `${p}instances/b`, ops);
    await put(writer, `${p.slice(0, -1)}x/outside`, 'still not', undefined);
    await put(writer, `${p}event_sources/d`, Buffer.from([0, 1, 2, 250]).toString('latin1'), ops);
    await eventually('four changes', () => rec.changes.length >= 4);
    expect(rec.changes.map(text)).toEqual(ops.map((o) => text(o.change)));
    const inEtcd = await etcdState(writer, p);
    for (const k of inEtcd.keys()) if (k.startsWith(`${p}bad/`)) inEtcd.delete(k); // the refused key
    expect(rec.state()).toEqual(inEtcd);
    expect(store.stats()).toMatchObject({ listed: 2, puts: 3, deletes: 1, duplicatesDropped: 0, relists: 0 });
  });

  it('reports the keys of an expired lease as deletes', async () => {
    const p = `${uniqueName('v1')}/`;
    const rec = new Recorder();
    const store = open(etcdDiscoveryStore({ endpoints: [etcd.endpoint] }));
    await store.watch(p, rec.onChanges, rec.onError);
    // A 2 s lease nobody keeps alive: a worker killed before it could deregister.
    const lease = writer.lease(2, { autoKeepAlive: false });
    await lease.grant();
    await lease.put(`${p}mdc/w`).value('card').exec();
    await lease.put(`${p}instances/w`).value('endpoint').exec();
    await put(writer, `${p}mdc/other`, 'no lease');
    await eventually('the lease keys put', () => rec.changes.length === 3);
    const t0 = Date.now();
    await eventually('the lease keys deleted', () => rec.changes.length === 5, 15_000);
    const waitedMs = Date.now() - t0;
    expect(rec.changes.slice(3).map(text).sort()).toEqual([`delete ${p}instances/w`, `delete ${p}mdc/w`]);
    expect(rec.state()).toEqual(new Map([[`${p}mdc/other`, 'no lease']]));
    expect(waitedMs).toBeLessThan(10_000);
  });

  it('resumes a dropped connection from its revision: what was written meanwhile arrives once, in order', async () => {
    const p = `${uniqueName('v1')}/`;
    const r = await relay(etcd.clientPort);
    try {
      for (let i = 0; i < 5; i++) await put(writer, `${p}k${i}`, `v${i}`);
      const rec = new Recorder();
      const store = open(etcdDiscoveryStore({ endpoints: [r.url], resumeBackoffMs: { initial: 100, max: 500 } }));
      await store.watch(p, rec.onChanges, rec.onError);
      expect(rec.initial).toHaveLength(5);
      const ops: Op[] = [];
      await put(writer, `${p}k0`, 'before the cut', ops);
      await eventually('the first change', () => rec.changes.length === 1);
      r.cut();
      await eventually('the store saw the drop', () => store.stats().disconnects > 0, 10_000);
      // Written while the store is cut off: a resume from the last delivered revision must bring all of it.
      for (let i = 0; i < 20; i++) await put(writer, `${p}k${i % 7}`, `cut-${i}`, ops);
      await del(writer, `${p}k1`, ops);
      await del(writer, `${p}k6`, ops);
      r.restore();
      await eventually('everything written while cut off', () => rec.changes.length >= ops.length, 20_000);
      for (let i = 0; i < 5; i++) await put(writer, `${p}after${i}`, `a${i}`, ops);
      await eventually('the changes after the resume', () => rec.changes.length >= ops.length, 10_000);
      await new Promise((res) => setTimeout(res, 300)); // room for a duplicate to show up, were one coming
      expect(rec.changes.map(text)).toEqual(ops.map((o) => text(o.change)));
      expect(rec.state()).toEqual(await etcdState(writer, p));
      const st = store.stats();
      expect(st.disconnects).toBeGreaterThan(0);
      expect(st.reattaches).toBeGreaterThan(0);
      expect(st.relists).toBe(0);
      expect(BigInt(st.revision)).toBeGreaterThanOrEqual(ops[ops.length - 1]!.rev);
      expect(rec.errors.some((e) => /lost its connection; resuming from revision/.test(e.message))).toBe(true);
    } finally {
      await r.close();
    }
  });

  it('lists again when etcd compacted the revision it would resume from, and reports only the difference', async () => {
    const p = `${uniqueName('v1')}/`;
    const r = await relay(etcd.clientPort);
    try {
      for (let i = 0; i < 6; i++) await put(writer, `${p}k${i}`, `v${i}`);
      const rec = new Recorder();
      const store = open(etcdDiscoveryStore({ endpoints: [r.url], resumeBackoffMs: { initial: 100, max: 500 } }));
      await store.watch(p, rec.onChanges, rec.onError);
      r.cut();
      await eventually('the store saw the drop', () => store.stats().disconnects > 0, 10_000);
      await del(writer, `${p}k0`); // gone
      await put(writer, `${p}k1`, 'changed'); // changed
      await put(writer, `${p}k2`, 'tmp');
      await put(writer, `${p}k2`, 'v2'); // changed and changed back: a new revision, reported once as a put
      await put(writer, `${p}new`, 'new'); // new
      await put(writer, `${p}short`, 'lived');
      await del(writer, `${p}short`); // came and went: not reported at all
      const head = await writer.get('anything').exec();
      await writer.kv.compact({ revision: head.header.revision, physical: true });
      r.restore();
      await eventually('the relist', () => store.stats().relists === 1, 20_000);
      await eventually('the state equals etcd', async () => JSON.stringify([...rec.state()].sort()) === JSON.stringify([...(await etcdState(writer, p))].sort()), 10_000);
      expect(rec.changes.map(text).sort()).toEqual([`delete ${p}k0`, `put ${p}k1=changed`, `put ${p}k2=v2`, `put ${p}new=new`].sort());
      expect(rec.errors.some((e) => /cancelled the watch .* from revision \d+ \(compacted, or refused/.test(e.message))).toBe(true);
      // And the rebuilt watch goes on from the listing.
      await put(writer, `${p}later`, 'x');
      await eventually('a change after the relist', () => rec.changes.length === 5);
      expect(text(rec.changes[4]!)).toBe(`put ${p}later=x`);
    } finally {
      await r.close();
    }
  });

  it('survives a restart of etcd mid-watch (SIGKILL, then start on the same data) without missing or repeating a change', async () => {
    const p = `${uniqueName('v1')}/`;
    const rec = new Recorder();
    const store = open(etcdDiscoveryStore({ endpoints: [etcd.endpoint], resumeBackoffMs: { initial: 100, max: 1_000 } }));
    await store.watch(p, rec.onChanges, rec.onError);
    const ops: Op[] = [];
    for (let i = 0; i < 10; i++) await put(writer, `${p}k${i % 4}`, `before-${i}`, ops);
    await etcd.kill9();
    const restartMs = await etcd.start();
    // Written as soon as etcd is back, before the store has necessarily re-attached its watch.
    const w2 = new Etcd3({ hosts: etcd.endpoint });
    try {
      for (let i = 0; i < 10; i++) await put(w2, `${p}k${i % 5}`, `after-${i}`, ops);
      await del(w2, `${p}k0`, ops);
      await eventually('every change before and after the restart', () => rec.changes.length >= ops.length, 30_000);
      await new Promise((res) => setTimeout(res, 300));
      expect(rec.changes.map(text)).toEqual(ops.map((o) => text(o.change)));
      expect(rec.state()).toEqual(await etcdState(w2, p));
      expect(store.stats().disconnects).toBeGreaterThan(0);
      expect(store.stats().relists).toBe(0);
      expect(restartMs).toBeLessThan(20_000);
    } finally {
      w2.close();
    }
    // The writer of the earlier tests reconnects by itself; later tests in this file keep using it.
  });

  it('rejects a watch when etcd cannot be reached, with a retryable error naming the endpoint', async () => {
    const store = open(etcdDiscoveryStore({ endpoints: ['http://127.0.0.1:1'], dialTimeoutMs: 500 }));
    const err = await store.watch('v1/', () => {}).then(
      () => null,
      (e: unknown) => e as Error & { code?: string; retryable?: boolean },
    );
    expect(err).not.toBeNull();
    expect(err!.code).toBe('UPSTREAM_UNAVAILABLE');
    expect(err!.retryable).toBe(true);
    expect(err!.message).toContain('127.0.0.1:1');
  });

  it('keeps watching when the consumer throws', async () => {
    const p = `${uniqueName('v1')}/`;
    const rec = new Recorder();
    let calls = 0;
    const store = open(etcdDiscoveryStore({ endpoints: [etcd.endpoint] }));
    await store.watch(
      p,
      (cs, initial) => {
        calls++;
        if (calls === 2) throw new Error('consumer bug');
        rec.onChanges(cs, initial);
      },
      rec.onError,
    );
    await put(writer, `${p}a`, '1'); // the consumer throws on this one
    await eventually('the failure reported', () => rec.errors.some((e) => /consumer bug/.test(e.message)));
    await put(writer, `${p}b`, '2');
    await eventually('the next change delivered', () => rec.changes.length === 1);
    expect(text(rec.changes[0]!)).toBe(`put ${p}b=2`);
  });
});

describe('etcd discovery store with authentication on (real etcd)', () => {
  it('lists and watches with a user and password, and refuses to start without them', async () => {
    const etcd = await ownEtcd();
    const admin = new Etcd3({ hosts: etcd.endpoint });
    let root: Etcd3 | undefined;
    const stores: EtcdDiscoveryStore[] = [];
    try {
      // etcd needs its root user (with the root role) before authentication can be turned on.
      await admin.role('root').create();
      await admin.user('root').create('root-pw');
      await admin.user('root').addRole('root');
      await admin.auth.authEnable({});
      root = new Etcd3({ hosts: etcd.endpoint, auth: { username: 'root', password: 'root-pw' } });
      await root.put('v1/mdc/a').value('card a').exec();

      const anonymous = etcdDiscoveryStore({ endpoints: [etcd.endpoint], dialTimeoutMs: 2_000 });
      stores.push(anonymous);
      const refused = await anonymous.watch('v1/', () => {}).then(
        () => null,
        (e: unknown) => e as Error & { code?: string },
      );
      expect(refused?.code).toBe('UPSTREAM_UNAVAILABLE');

      const wrong = etcdDiscoveryStore({ endpoints: [etcd.endpoint], auth: { username: 'root', password: 'nope' }, dialTimeoutMs: 2_000 });
      stores.push(wrong);
      expect(await wrong.watch('v1/', () => {}).then(() => 'listed', () => 'refused')).toBe('refused');

      const rec = new Recorder();
      const store = etcdDiscoveryStore({ endpoints: [etcd.endpoint], auth: { username: 'root', password: 'root-pw' } });
      stores.push(store);
      await store.watch('v1/', rec.onChanges, rec.onError);
      expect(rec.initial.map(text)).toEqual(['put v1/mdc/a=card a']);
      await root.put('v1/mdc/b').value('card b').exec();
      await root.delete().key('v1/mdc/a').exec();
      await eventually('the authenticated watch delivers', () => rec.changes.length === 2);
      expect(rec.changes.map(text)).toEqual(['put v1/mdc/b=card b', 'delete v1/mdc/a']);
    } finally {
      await Promise.all(stores.map((s) => s.close()));
      root?.close();
      admin.close();
      await etcd.cleanup();
    }
  });
});
