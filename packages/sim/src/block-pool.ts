/**
 * One engine's GPU KV cache: a fixed number of blocks, each either free,
 * private to one request (allocated but not yet a full, hashed block), or a
 * cached full block keyed by its sequence hash. Cached blocks carry a
 * reference count; at zero they stay resident (reusable by a later prompt)
 * on an LRU list and are the only blocks eviction may take, oldest first.
 *
 * Every counter here is checked by `checkInvariants`, which the property
 * tests call after every pass.
 */

/**
 * Map key for a sequence hash: its low 30 bits, a small integer. V8 hashes a
 * bigint Map key from its digits on every lookup, which dominated replay time;
 * a small-integer key is hashed for free, and the rare blocks whose low bits
 * collide are chained and told apart by the full hash.
 */
export function blockKey(seq: bigint): number {
  return Number(seq & 0x3fff_ffffn);
}

/** Same key from the low u32 word of a hash (read from a Uint32Array view, no bigint work). */
export function blockKeyFromLow(lo: number): number {
  return lo & 0x3fff_ffff;
}

export class CachedBlock {
  /** Requests holding this block. */
  ref = 0;
  /** Next block whose key collides with this one. */
  chain: CachedBlock | null = null;
  /** LRU links, meaningful only while ref === 0. */
  prev: CachedBlock | null = null;
  next: CachedBlock | null = null;
  constructor(
    readonly key: number,
    readonly seq: bigint,
    readonly local: bigint,
  ) {}
}

export class BlockPool {
  private readonly byKey = new Map<number, CachedBlock>();
  private cached = 0;
  /** Whether the last `promote` added a block that was not cached before. */
  lastPromoteWasNew = false;
  private lruHead: CachedBlock | null = null; // least recently released: evicted first
  private lruTail: CachedBlock | null = null;
  private lruSize = 0;
  private privateBlocks = 0;
  private referenced = 0;
  /** Sequence hashes evicted since the last drain (the engine turns them into `removed` events). */
  readonly evicted: bigint[] = [];

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity <= 0) throw new RangeError(`capacity must be a positive integer, got ${capacity}`);
  }

  /** Blocks not free: cached (referenced or not) plus private. */
  get used(): number {
    return this.cached + this.privateBlocks;
  }
  get free(): number {
    return this.capacity - this.used;
  }
  /** Blocks held by live requests (Dynamo's active blocks): referenced cached blocks plus private ones. */
  get active(): number {
    return this.referenced + this.privateBlocks;
  }
  /** Resident but unreferenced cached blocks. */
  get evictable(): number {
    return this.lruSize;
  }
  get cachedBlocks(): number {
    return this.cached;
  }

  lookup(key: number, seq: bigint): CachedBlock | undefined {
    let b = this.byKey.get(key);
    while (b !== undefined && b.seq !== seq) b = b.chain ?? undefined;
    return b;
  }

  has(key: number, seq: bigint): boolean {
    return this.lookup(key, seq) !== undefined;
  }

  private insert(b: CachedBlock): void {
    const head = this.byKey.get(b.key);
    b.chain = head ?? null;
    this.byKey.set(b.key, b);
    this.cached++;
  }

  private remove(b: CachedBlock): void {
    let prev: CachedBlock | null = null;
    let cur = this.byKey.get(b.key) ?? null;
    while (cur !== null && cur !== b) {
      prev = cur;
      cur = cur.chain;
    }
    if (cur === null) throw new Error(`block ${b.seq} is not cached`);
    if (prev === null) {
      if (b.chain === null) this.byKey.delete(b.key);
      else this.byKey.set(b.key, b.chain);
    } else prev.chain = b.chain;
    b.chain = null;
    this.cached--;
  }

  acquire(b: CachedBlock): void {
    if (b.ref === 0) {
      this.unlink(b);
      this.referenced++;
    }
    b.ref++;
  }

  /** Drop one reference; at zero the block joins the LRU tail (evicted after older ones). */
  release(b: CachedBlock): void {
    if (b.ref <= 0) throw new Error(`reference count of block ${b.seq} would go negative`);
    b.ref--;
    if (b.ref === 0) {
      this.referenced--;
      b.prev = this.lruTail;
      b.next = null;
      if (this.lruTail) this.lruTail.next = b;
      else this.lruHead = b;
      this.lruTail = b;
      this.lruSize++;
    }
  }

  private unlink(b: CachedBlock): void {
    if (b.prev) b.prev.next = b.next;
    else this.lruHead = b.next;
    if (b.next) b.next.prev = b.prev;
    else this.lruTail = b.prev;
    b.prev = b.next = null;
    this.lruSize--;
  }

  /**
   * Reserve `n` private blocks, evicting least-recently-released cached blocks
   * as needed. All or nothing: false (and nothing evicted) when even evicting
   * every unreferenced block would not make room.
   */
  allocPrivate(n: number): boolean {
    if (n <= 0) return true;
    if (this.free + this.lruSize < n) return false;
    while (this.free < n) {
      const victim = this.lruHead!;
      this.unlink(victim);
      this.remove(victim);
      this.evicted.push(victim.seq);
    }
    this.privateBlocks += n;
    return true;
  }

  freePrivate(n: number): void {
    if (n > this.privateBlocks) throw new Error(`freeing ${n} private blocks, only ${this.privateBlocks} held`);
    this.privateBlocks -= n;
  }

  /**
   * A private block just became full: give it its hash. If that hash is
   * already cached (another request computed the same block) the private copy
   * is dropped and the cached one is shared. Returns the block now held;
   * `lastPromoteWasNew` says whether it is new to the cache (new blocks are
   * announced as `stored`). No result object: this runs once per block.
   */
  promote(key: number, seq: bigint, local: bigint): CachedBlock {
    this.freePrivate(1);
    const existing = this.lookup(key, seq);
    if (existing !== undefined) {
      this.acquire(existing);
      this.lastPromoteWasNew = false;
      return existing;
    }
    const b = new CachedBlock(key, seq, local);
    b.ref = 1;
    this.referenced++;
    this.insert(b);
    this.lastPromoteWasNew = true;
    return b;
  }

  /** LRU order, oldest first (tests and diagnostics). */
  lruOrder(): bigint[] {
    const out: bigint[] = [];
    for (let b = this.lruHead; b; b = b.next) out.push(b.seq);
    return out;
  }

  /** Throws when a counter disagrees with the structures it summarises. */
  checkInvariants(): void {
    let refd = 0;
    let unref = 0;
    let n = 0;
    const seen = new Set<bigint>();
    for (const [key, head] of this.byKey) {
      for (let b: CachedBlock | null = head; b !== null; b = b.chain) {
        if (b.key !== key || b.key !== blockKey(b.seq)) throw new Error(`block ${b.seq} filed under the wrong key`);
        if (seen.has(b.seq)) throw new Error(`block ${b.seq} cached twice`);
        seen.add(b.seq);
        n++;
        if (b.ref < 0) throw new Error(`negative reference count on ${b.seq}`);
        if (b.ref > 0) refd++;
        else unref++;
      }
    }
    if (n !== this.cached) throw new Error(`cached counter ${this.cached} != ${n}`);
    if (refd !== this.referenced) throw new Error(`referenced counter ${this.referenced} != ${refd}`);
    if (unref !== this.lruSize) throw new Error(`LRU size ${this.lruSize} != unreferenced ${unref}`);
    let walked = 0;
    for (let b = this.lruHead; b; b = b.next) {
      if (b.ref !== 0 || this.lookup(b.key, b.seq) !== b) throw new Error(`LRU holds a referenced or foreign block ${b.seq}`);
      walked++;
    }
    if (walked !== this.lruSize) throw new Error(`LRU walk ${walked} != size ${this.lruSize}`);
    if (this.used > this.capacity || this.privateBlocks < 0) throw new Error(`over-allocated: ${this.used} of ${this.capacity}`);
  }
}
