/**
 * One engine's GPU KV cache: a fixed number of blocks, each either free,
 * private to one request (allocated but not yet a full, hashed block), or a
 * cached full block keyed by its sequence hash. Cached blocks carry a
 * reference count; at zero they stay resident (reusable by a later prompt)
 * on an LRU list and are the only blocks eviction may take, oldest first.
 *
 * Layout: hashes are handled as (lo, hi) u32 words, never as bigints. Reading
 * a BigUint64Array element or hashing a bigint Map key allocates or walks
 * digits on every access, and that dominated replay profiles; here a cached
 * block is a slot index into typed arrays, found through an open-addressing
 * table indexed by the low bits of its hash (xxh3 output, already uniform).
 * Deletion uses backward shifting, so the table never fills with tombstones.
 *
 * Every counter is checked by the tests' `checkPoolInvariants` after every
 * pass of the property tests.
 */

const NONE = -1;

export class BlockPool {
  readonly capacity: number;
  // Per cached-block slot.
  private readonly seqLo: Uint32Array;
  private readonly seqHi: Uint32Array;
  private readonly ref: Int32Array;
  private readonly prev: Int32Array; // LRU links, meaningful while ref === 0
  private readonly next: Int32Array;
  private readonly freeSlots: Int32Array;
  private freeTop: number;
  // Open-addressing table: slot + 1, 0 = empty.
  private readonly table: Int32Array;
  private readonly mask: number;

  private lruHead = NONE; // least recently released: evicted first
  private lruTail = NONE;
  private lruSize = 0;
  private cached = 0;
  private privateBlocks = 0;
  private referenced = 0;
  /** Whether the last `promote` added a block that was not cached before. */
  lastPromoteWasNew = false;
  /** (lo, hi) words of blocks evicted since the last drain; the engine turns them into `removed` events. */
  readonly evicted: number[] = [];

  constructor(capacity: number) {
    if (!Number.isInteger(capacity) || capacity <= 0) throw new RangeError(`capacity must be a positive integer, got ${capacity}`);
    this.capacity = capacity;
    this.seqLo = new Uint32Array(capacity);
    this.seqHi = new Uint32Array(capacity);
    this.ref = new Int32Array(capacity);
    this.prev = new Int32Array(capacity).fill(NONE);
    this.next = new Int32Array(capacity).fill(NONE);
    this.freeSlots = new Int32Array(capacity);
    for (let i = 0; i < capacity; i++) this.freeSlots[i] = capacity - 1 - i;
    this.freeTop = capacity;
    let size = 16;
    while (size < capacity * 2) size *= 2; // load factor <= 0.5
    this.table = new Int32Array(size);
    this.mask = size - 1;
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
  get cachedBlocks(): number {
    return this.cached;
  }

  /** Slot of the cached block with hash words (lo, hi), or -1. */
  find(lo: number, hi: number): number {
    const t = this.table;
    for (let i = lo & this.mask; ; i = (i + 1) & this.mask) {
      const e = t[i]!;
      if (e === 0) return NONE;
      const s = e - 1;
      if (this.seqLo[s] === lo && this.seqHi[s] === hi) return s;
    }
  }

  private tableInsert(slot: number): void {
    const t = this.table;
    let i = this.seqLo[slot]! & this.mask;
    while (t[i] !== 0) i = (i + 1) & this.mask;
    t[i] = slot + 1;
  }

  private tableDelete(slot: number): void {
    const t = this.table;
    const m = this.mask;
    let i = this.seqLo[slot]! & m;
    while (t[i] !== slot + 1) {
      if (t[i] === 0) throw new Error('block missing from the hash table');
      i = (i + 1) & m;
    }
    // Backward-shift deletion: pull later entries of the probe run into the hole.
    let hole = i;
    for (let j = (i + 1) & m; t[j] !== 0; j = (j + 1) & m) {
      const home = this.seqLo[t[j]! - 1]! & m;
      // Move entry j into the hole unless its home lies cyclically in (hole, j].
      const inRange = hole <= j ? home > hole && home <= j : home > hole || home <= j;
      if (!inRange) {
        t[hole] = t[j]!;
        hole = j;
      }
    }
    t[hole] = 0;
  }

  acquire(slot: number): void {
    if (this.ref[slot] === 0) {
      this.unlink(slot);
      this.referenced++;
    }
    this.ref[slot]!++;
  }

  /** Drop one reference; at zero the block joins the LRU tail (evicted after older ones). */
  release(slot: number): void {
    const r = this.ref[slot]!;
    if (r <= 0) throw new Error(`reference count of block slot ${slot} would go negative`);
    this.ref[slot] = r - 1;
    if (r === 1) {
      this.referenced--;
      this.prev[slot] = this.lruTail;
      this.next[slot] = NONE;
      if (this.lruTail !== NONE) this.next[this.lruTail] = slot;
      else this.lruHead = slot;
      this.lruTail = slot;
      this.lruSize++;
    }
  }

  private unlink(slot: number): void {
    const p = this.prev[slot]!;
    const n = this.next[slot]!;
    if (p !== NONE) this.next[p] = n;
    else this.lruHead = n;
    if (n !== NONE) this.prev[n] = p;
    else this.lruTail = p;
    this.prev[slot] = this.next[slot] = NONE;
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
      const victim = this.lruHead;
      this.unlink(victim);
      this.tableDelete(victim);
      this.evicted.push(this.seqLo[victim]!, this.seqHi[victim]!);
      this.freeSlots[this.freeTop++] = victim;
      this.cached--;
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
   * is dropped and the cached one is shared. Returns the slot now held;
   * `lastPromoteWasNew` says whether it is new to the cache (new blocks are
   * announced as `stored`). No result object: this runs once per block.
   */
  promote(lo: number, hi: number): number {
    this.freePrivate(1);
    const existing = this.find(lo, hi);
    if (existing !== NONE) {
      this.acquire(existing);
      this.lastPromoteWasNew = false;
      return existing;
    }
    // A private block was just given up, so a slot is free (cached + private <= capacity).
    const s = this.freeSlots[--this.freeTop]!;
    this.seqLo[s] = lo;
    this.seqHi[s] = hi;
    this.ref[s] = 1;
    this.referenced++;
    this.cached++;
    this.tableInsert(s);
    this.lastPromoteWasNew = true;
    return s;
  }
}
