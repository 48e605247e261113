interface Pending<I, R> {
  item: I;
  /** The item's keys and rows, asked of the options once. */
  keys: string[];
  rows: number;
  resolve: (result: R) => void;
  reject: (err: unknown) => void;
}

export interface StatementBatcherOptions<I, R> {
  /** Writes the items in one statement (one commit); answers one result per item, in order. */
  write: (items: I[]) => Promise<R[]>;
  /**
   * What an item writes that no other item being written may (a contact): a later item with one of its
   * keys waits until no statement running or being formed has that key, so statements of this batcher
   * never wait on each other's row locks and items of one key are written in the order they came.
   */
  keys: (item: I) => Iterable<string>;
  /** Rows an item adds to its statement (default 1). */
  rows?: (item: I) => number;
  /** Rows a statement takes at most; an item larger than that goes alone. */
  maxRows: number;
  /** Statements running at once. */
  maxInFlight: number;
}

/**
 * Writes the items of concurrent callers together: what arrives while a statement runs joins the next
 * one, so under load PostgreSQL sees one statement and one commit per batch rather than per caller,
 * and at low load a batch is a single item that waits for nothing. Each caller still gets its answer
 * only after its own item is committed. A batch that fails is retried one item at a time, so a bad
 * item fails alone, with its own error.
 */
export class StatementBatcher<I, R> {
  private queue: Array<Pending<I, R>> = [];
  private inFlight = 0;
  /** Keys of the items being written. */
  private readonly busy = new Set<string>();

  constructor(private readonly opts: StatementBatcherOptions<I, R>) {}

  write(item: I): Promise<R> {
    return new Promise((resolve, reject) => {
      this.queue.push({ item, keys: [...this.opts.keys(item)], rows: this.opts.rows?.(item) ?? 1, resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    while (this.inFlight < this.opts.maxInFlight && this.queue.length > 0) {
      const batch = this.take();
      // Everything pending waits on a key being written: the statement that ends pumps again.
      if (!batch.length) return;
      this.inFlight++;
      void this.flush(batch).finally(() => {
        this.inFlight--;
        this.pump();
      });
    }
  }

  /**
   * The oldest pending items whose keys are not being written, up to maxRows rows; the rest keep their
   * order. An item that waits keeps its keys from the items after it, so one key's items go in order.
   */
  private take(): Array<Pending<I, R>> {
    const batch: Array<Pending<I, R>> = [];
    const rest: Array<Pending<I, R>> = [];
    const waiting = new Set<string>();
    let rows = 0;
    for (const p of this.queue) {
      const free = !p.keys.some((k) => this.busy.has(k) || waiting.has(k));
      if (free && (batch.length === 0 || rows + p.rows <= this.opts.maxRows)) {
        for (const k of p.keys) this.busy.add(k);
        rows += p.rows;
        batch.push(p);
      } else {
        for (const k of p.keys) waiting.add(k);
        rest.push(p);
      }
    }
    this.queue = rest;
    return batch;
  }

  private async flush(batch: Array<Pending<I, R>>): Promise<void> {
    try {
      await this.writeAll(batch);
    } finally {
      for (const p of batch) for (const k of p.keys) this.busy.delete(k);
    }
  }

  private async writeAll(batch: Array<Pending<I, R>>): Promise<void> {
    try {
      const results = await this.opts.write(batch.map((p) => p.item));
      batch.forEach((p, i) => p.resolve(results[i]));
    } catch (err) {
      if (batch.length === 1) return batch[0].reject(err);
      for (const p of batch) {
        await this.opts.write([p.item]).then(([r]) => p.resolve(r), p.reject);
      }
    }
  }
}
