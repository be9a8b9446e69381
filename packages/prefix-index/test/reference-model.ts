/**
 * A tiny, obviously-correct model of the prefix index's semantics, for differential tests only.
 * Plain objects, Maps and Sets; garbage collection stands in for reference counting; match is brute
 * force per publisher and per tier set. No attention to speed.
 */
import type { KvEvent, StorageTier } from '@vantage/types';

export type Reason = 'unknown_parent' | 'event_gap' | 'missed_start';

interface Node {
  local: bigint;
  parent: Node | null; // null: root, or cut from the tree
  children: Map<bigint, Node>;
  holders: Map<string, Set<StorageTier>>; // publisher key -> tiers
}

interface Entry {
  node: Node;
  tiers: Set<StorageTier>;
}

export interface RefPublisher {
  key: string;
  workerId: bigint;
  dpRank: number;
  blocks: Map<bigint, Entry>;
  lastEventId: bigint | null;
  expectStart: boolean;
  suspect: { reason: Reason; sinceMs: number; incidents: number } | null;
  lastEventMs: number | null;
}

export interface RefApply {
  status: 'applied' | 'duplicate' | 'rejected';
  rejection: 'self_referencing' | null;
  missedEvents: bigint;
  unknownParent: boolean;
  unknownRemovals: bigint[];
}

export interface RefMatch {
  workerId: bigint;
  dpRank: number;
  device: number;
  host: number;
  disk: number;
  any: number;
  treeSize: number;
  suspect: RefPublisher['suspect'];
  lastEventId: bigint | null;
}

const newNode = (local: bigint, parent: Node | null): Node => ({
  local,
  parent,
  children: new Map(),
  holders: new Map(),
});

export class ReferenceIndex {
  readonly root = newNode(0n, null);
  readonly pubs = new Map<string, RefPublisher>();
  counters = { duplicates: 0, gaps: 0, unknownParents: 0, unknownRemovals: 0, missedStarts: 0 };

  private pub(workerId: bigint, dpRank: number): RefPublisher {
    const key = `${workerId}:${dpRank}`;
    let p = this.pubs.get(key);
    if (!p) {
      p = { key, workerId, dpRank, blocks: new Map(), lastEventId: null, expectStart: true, suspect: null, lastEventMs: null };
      this.pubs.set(key, p);
    }
    return p;
  }

  private suspect(p: RefPublisher, reason: Reason, now: number): void {
    if (p.suspect) p.suspect = { ...p.suspect, incidents: p.suspect.incidents + 1 };
    else p.suspect = { reason, sinceMs: now, incidents: 1 };
  }

  /** Take publisher p off node on the given tiers; a node nobody holds leaves the tree and loses its children. */
  private release(node: Node, p: RefPublisher, tiers: Iterable<StorageTier>): void {
    const held = node.holders.get(p.key);
    if (held) {
      for (const t of tiers) held.delete(t);
      if (held.size === 0) node.holders.delete(p.key);
    }
    if (node.holders.size === 0) {
      if (node.parent && node.parent.children.get(node.local) === node) node.parent.children.delete(node.local);
      node.parent = null;
      for (const c of node.children.values()) c.parent = null;
      node.children = new Map();
    }
  }

  private hold(node: Node, p: RefPublisher, tier: StorageTier): void {
    let s = node.holders.get(p.key);
    if (!s) node.holders.set(p.key, (s = new Set()));
    s.add(tier);
  }

  private clear(p: RefPublisher): void {
    for (const e of p.blocks.values()) this.release(e.node, p, [...e.tiers]);
    p.blocks.clear();
  }

  apply(ev: KvEvent, now: number): RefApply {
    const p = this.pub(ev.workerId, ev.dpRank);
    let missed = 0n;
    if (p.lastEventId !== null) {
      if (ev.eventId <= p.lastEventId) {
        this.counters.duplicates++;
        return { status: 'duplicate', rejection: null, missedEvents: 0n, unknownParent: false, unknownRemovals: [] };
      }
      if (ev.eventId !== p.lastEventId + 1n) {
        missed = ev.eventId - p.lastEventId - 1n;
        this.counters.gaps++;
        this.suspect(p, 'event_gap', now);
      }
    } else if (p.expectStart && ev.eventId > 1n) {
      this.counters.missedStarts++;
      this.suspect(p, 'missed_start', now);
    }
    p.lastEventId = ev.eventId;
    p.expectStart = false;
    p.lastEventMs = now;
    const d = ev.data;
    const tier = ev.storageTier;
    if (d.kind === 'cleared') {
      this.clear(p);
      p.suspect = null;
      return { status: 'applied', rejection: null, missedEvents: missed, unknownParent: false, unknownRemovals: [] };
    }
    if (d.kind === 'removed') {
      const unknown: bigint[] = [];
      for (const h of d.blockHashes) {
        const e = p.blocks.get(h);
        if (!e || !e.tiers.has(tier)) {
          unknown.push(h);
          continue;
        }
        e.tiers.delete(tier);
        if (e.tiers.size === 0) p.blocks.delete(h);
        this.release(e.node, p, [tier]);
      }
      this.counters.unknownRemovals += unknown.length;
      return { status: 'applied', rejection: null, missedEvents: missed, unknownParent: false, unknownRemovals: unknown };
    }
    // stored: a block id named twice, the parent counted, refuses the event whole (its id is taken)
    const named = new Set<bigint>(d.parentHash === null ? [] : [d.parentHash]);
    for (const h of d.blockHashes) named.add(h);
    if (named.size !== d.blockHashes.length + (d.parentHash === null ? 0 : 1)) {
      return { status: 'rejected', rejection: 'self_referencing', missedEvents: missed, unknownParent: false, unknownRemovals: [] };
    }
    let cur: Node | 'detached';
    let unknownParent = false;
    if (d.parentHash === null) cur = this.root;
    else {
      const e = p.blocks.get(d.parentHash);
      if (e) cur = e.node;
      else {
        unknownParent = true;
        cur = 'detached';
      }
    }
    for (let i = 0; i < d.blockHashes.length; i++) {
      const ext = d.blockHashes[i]!;
      const local = d.tokensHashes[i]!;
      let target: Node;
      if (cur === 'detached') target = newNode(local, null);
      else {
        const existing = cur.children.get(local);
        if (existing) target = existing;
        else {
          target = newNode(local, cur);
          cur.children.set(local, target);
        }
      }
      const e = p.blocks.get(ext);
      if (!e) p.blocks.set(ext, { node: target, tiers: new Set([tier]) });
      else if (e.node === target) e.tiers.add(tier);
      else {
        const old = e.node;
        const oldTiers = [...e.tiers];
        p.blocks.set(ext, { node: target, tiers: new Set([tier]) });
        this.release(old, p, oldTiers);
      }
      this.hold(target, p, tier);
      cur = target;
    }
    if (unknownParent) {
      this.counters.unknownParents++;
      this.suspect(p, 'unknown_parent', now);
    }
    return { status: 'applied', rejection: null, missedEvents: missed, unknownParent, unknownRemovals: [] };
  }

  removeDpRank(workerId: bigint, dpRank: number): void {
    const p = this.pubs.get(`${workerId}:${dpRank}`);
    if (!p) return;
    this.clear(p);
    this.pubs.delete(p.key);
  }

  removeWorker(workerId: bigint): void {
    for (const p of [...this.pubs.values()]) if (p.workerId === workerId) this.removeDpRank(workerId, p.dpRank);
  }

  resync(workerId: bigint, dpRank: number, now: number, lastEventId?: bigint): void {
    const p = this.pub(workerId, dpRank);
    this.clear(p);
    p.suspect = null;
    p.lastEventId = lastEventId ?? null;
    p.expectStart = false;
    p.lastEventMs = now;
  }

  /** Brute force: walk the request from the root separately for each publisher and tier set. */
  match(locals: readonly bigint[]): RefMatch[] {
    const tierSets: StorageTier[][] = [
      ['device'],
      ['device', 'host_pinned'],
      ['device', 'host_pinned', 'disk'],
      ['device', 'host_pinned', 'disk', 'external'],
    ];
    const out: RefMatch[] = [];
    for (const p of this.pubs.values()) {
      const counts = tierSets.map((ts) => {
        let node = this.root;
        let n = 0;
        for (const h of locals) {
          const c = node.children.get(h);
          const held = c?.holders.get(p.key);
          if (!c || !held || !ts.some((t) => held.has(t))) break;
          n++;
          node = c;
        }
        return n;
      });
      out.push({
        workerId: p.workerId,
        dpRank: p.dpRank,
        device: counts[0]!,
        host: counts[1]!,
        disk: counts[2]!,
        any: counts[3]!,
        treeSize: p.blocks.size,
        suspect: p.suspect,
        lastEventId: p.lastEventId,
      });
    }
    return out.sort(byPublisher);
  }

  tierCounts(): Map<string, Record<StorageTier, number>> {
    const out = new Map<string, Record<StorageTier, number>>();
    for (const p of this.pubs.values()) {
      const r: Record<StorageTier, number> = { device: 0, host_pinned: 0, disk: 0, external: 0 };
      for (const e of p.blocks.values()) for (const t of e.tiers) r[t]++;
      out.set(p.key, r);
    }
    return out;
  }
}

export function byPublisher(a: { workerId: bigint; dpRank: number }, b: { workerId: bigint; dpRank: number }): number {
  if (a.workerId !== b.workerId) return a.workerId < b.workerId ? -1 : 1;
  return a.dpRank - b.dpRank;
}
