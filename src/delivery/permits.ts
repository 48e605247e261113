/** Permits shared by every send slot of the process, so DELIVERY_IN_FLIGHT bounds them all together. */
export class Permits {
  private queue: Array<() => void> = [];
  constructor(private free: number) {}

  async take(): Promise<void> {
    if (this.free > 0) {
      this.free--;
      return;
    }
    await new Promise<void>((resolve) => this.queue.push(resolve));
  }

  give(): void {
    const next = this.queue.shift();
    if (next) next();
    else this.free++;
  }
}
