/**
 * Baseline for the benchmark: the same semantics as PrefixIndex written the straightforward way,
 * the shape Dynamo's radix tree has: node objects with `Map<bigint, Node>` children, a holder map
 * per node, a `Map<bigint, Entry>` per publisher, and a match that walks the request keeping an
 * active set per tier group. No typed arrays, no hand-written tables.
 */
import type { KvEvent, StorageTier } from '@vantage/types';

const TIER_BIT: Record<StorageTier, number> = { device: 1, host_pinned: 2, disk: 4, external: 8 };

interface Holder {
  readonly workerId: bigint;
  readonly dpRank: number;
  readonly blocks: Map<bigint, Entry>;
  lastEventId: bigint | null;
  suspect: string | null;
}

interface MNode {
  readonly local: bigint;
  parent: MNode | null;
  children: Map<bigint, MNode>;
  /** holder -> tier bits */
  readonly holders: Map<Holder, number>;
}

interface Entry {
  node: MNode;
  tiers: number;
}

export interface BaselineMatch {
  workerId: bigint;
  dpRank: number;
  deviceBlocks: number;
  anyBlocks: number;
  treeSize: number;
}

const node = (local: bigint, parent: MNode | null): MNode => ({ local, parent, children: new Map(), holders: new Map() });

export class MapIndex {
  private readonly root = node(0n, null);
  private readonly holders = new Map<bigint, Map<number, Holder>>();

  constructor(readonly blockSize: number) {}

  private holder(workerId: bigint, dpRank: number): Holder {
    let ranks = this.holders.get(workerId);
    if (!ranks) this.holders.set(workerId, (ranks = new Map()));
    let h = ranks.get(dpRank);
    if (!h) ranks.set(dpRank, (h = { workerId, dpRank, blocks: new Map(), lastEventId: null, suspect: null }));
    return h;
  }

  private release(n: MNode, h: Holder, tiers: number): void {
    const rest = (n.holders.get(h) ?? 0) & ~tiers;
    if (rest === 0) n.holders.delete(h);
    else n.holders.set(h, rest);
    if (n.holders.size === 0) {
      if (n.parent && n.parent.children.get(n.local) === n) n.parent.children.delete(n.local);
      n.parent = null;
      for (const c of n.children.values()) c.parent = null;
      n.children = new Map();
    }
  }

  apply(ev: KvEvent): void {
    const h = this.holder(ev.workerId, ev.dpRank);
    if (h.lastEventId !== null) {
      if (ev.eventId <= h.lastEventId) return;
      if (ev.eventId !== h.lastEventId + 1n) h.suspect ??= 'event_gap';
    } else if (ev.eventId > 1n) h.suspect ??= 'missed_start';
    h.lastEventId = ev.eventId;
    const tier = TIER_BIT[ev.storageTier];
    const d = ev.data;
    if (d.kind === 'cleared') {
      for (const e of h.blocks.values()) this.release(e.node, h, e.tiers);
      h.blocks.clear();
      h.suspect = null;
      return;
    }
    if (d.kind === 'removed') {
      for (const ext of d.blockHashes) {
        const e = h.blocks.get(ext);
        if (!e || (e.tiers & tier) === 0) continue;
        e.tiers &= ~tier;
        if (e.tiers === 0) h.blocks.delete(ext);
        this.release(e.node, h, tier);
      }
      return;
    }
    let cur: MNode | null;
    if (d.parentHash === null) cur = this.root;
    else {
      cur = h.blocks.get(d.parentHash)?.node ?? null;
      if (cur === null) h.suspect ??= 'unknown_parent';
    }
    for (let i = 0; i < d.blockHashes.length; i++) {
      const ext = d.blockHashes[i]!;
      const local = d.tokensHashes[i]!;
      let target = cur?.children.get(local);
      if (!target) {
        target = node(local, cur);
        cur?.children.set(local, target);
      }
      const e = h.blocks.get(ext);
      if (!e) h.blocks.set(ext, { node: target, tiers: tier });
      else if (e.node === target) e.tiers |= tier;
      else {
        const old = e.node;
        const oldTiers = e.tiers;
        e.node = target;
        e.tiers = tier;
        this.release(old, h, oldTiers);
      }
      target.holders.set(h, (target.holders.get(h) ?? 0) | tier);
      cur = target;
    }
  }

  /** Dynamo-style walk: active holder sets shrink down the path; leavers record their depth. */
  match(localHashes: BigUint64Array): BaselineMatch[] {
    const device = new Map<Holder, number>();
    const any = new Map<Holder, number>();
    let activeDev: Set<Holder> | null = null;
    let activeAny: Set<Holder> | null = null;
    let cur = this.root;
    let depth = 0;
    for (; depth < localHashes.length; depth++) {
      const c = cur.children.get(localHashes[depth]!);
      if (!c) break;
      if (activeAny === null || activeDev === null) {
        activeAny = new Set(c.holders.keys());
        activeDev = new Set();
        for (const [h, t] of c.holders) if (t & 1) activeDev.add(h);
      } else {
        for (const h of activeAny) {
          if (!c.holders.has(h)) {
            any.set(h, depth);
            activeAny.delete(h);
          }
        }
        for (const h of activeDev) {
          if (((c.holders.get(h) ?? 0) & 1) === 0) {
            device.set(h, depth);
            activeDev.delete(h);
          }
        }
      }
      if (activeAny.size === 0) break;
      cur = c;
    }
    for (const h of activeAny ?? []) any.set(h, depth);
    for (const h of activeDev ?? []) device.set(h, depth);
    const out: BaselineMatch[] = [];
    for (const ranks of this.holders.values()) {
      for (const h of ranks.values()) {
        out.push({
          workerId: h.workerId,
          dpRank: h.dpRank,
          deviceBlocks: device.get(h) ?? 0,
          anyBlocks: any.get(h) ?? 0,
          treeSize: h.blocks.size,
        });
      }
    }
    return out;
  }

  get totalBlocks(): number {
    let t = 0;
    for (const ranks of this.holders.values()) for (const h of ranks.values()) t += h.blocks.size;
    return t;
  }
}
