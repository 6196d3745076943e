// A small LRU map with optional per-entry expiry, on Map insertion order (get re-inserts to mark recent use).

export class LruCache<K, V> {
  private readonly entries = new Map<K, { value: V; expiresAt: number }>();

  constructor(readonly maxEntries: number) {}

  get size(): number {
    return this.entries.size;
  }

  /** The value, unless absent or expired at `now` (ms; expired entries are dropped). */
  get(key: K, now: number = Date.now()): V | undefined {
    const e = this.entries.get(key);
    if (e === undefined) return undefined;
    if (e.expiresAt <= now) {
      this.entries.delete(key);
      return undefined;
    }
    this.entries.delete(key);
    this.entries.set(key, e);
    return e.value;
  }

  /** Stores `value` until `expiresAt` (ms, default never), evicting the least recently used entry when full. */
  set(key: K, value: V, expiresAt: number = Number.POSITIVE_INFINITY): void {
    if (this.maxEntries <= 0) return;
    this.entries.delete(key);
    if (this.entries.size >= this.maxEntries) {
      const oldest = this.entries.keys().next();
      if (!oldest.done) this.entries.delete(oldest.value);
    }
    this.entries.set(key, { value, expiresAt });
  }

  delete(key: K): boolean {
    return this.entries.delete(key);
  }

  clear(): void {
    this.entries.clear();
  }
}
