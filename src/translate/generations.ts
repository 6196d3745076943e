// Memoized values kept across a sequence of translations, each kept only while translations use it.

/** An entry and the translation that last used it. */
interface Slot<T> {
  value: T;
  used: number;
}

/**
 * Values by key, kept while every translation uses them: `get` sees what the last finished translation used, `keep`
 * marks a value used by this one, `end` forgets the rest. One map for all translations, so that reusing an entry
 * allocates nothing (a new map per translation would be garbage of the old generation every time).
 */
export class Generations<K, T> {
  readonly #slots = new Map<K, Slot<T>>();
  #current = 0;
  #finished = -1;
  /** Every translation gets a new number, so marks left by one that did not finish are never taken for current. */
  #counter = 0;

  begin(): void {
    this.#current = ++this.#counter;
  }

  get(key: K): T | undefined {
    const slot = this.#slots.get(key);
    return slot !== undefined && slot.used === this.#finished ? slot.value : undefined;
  }

  keep(key: K, value: T): void {
    const slot = this.#slots.get(key);
    if (slot === undefined) this.#slots.set(key, { value, used: this.#current });
    else {
      slot.value = value;
      slot.used = this.#current;
    }
  }

  end(): void {
    const current = this.#current;
    this.#slots.forEach((slot, key) => {
      if (slot.used !== current) this.#slots.delete(key);
    });
    this.#finished = current;
  }
}
