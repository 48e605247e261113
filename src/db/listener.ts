import pg from 'pg';
import type { Logger } from 'pino';

export interface ListenerEvents {
  /** A NOTIFY on the channel, with its payload. */
  notification(payload: string): void;
  /** LISTEN is in place (at start, and again after every reconnect): what was notified meanwhile is lost. */
  listening?(): void;
  /** The connection failed or ended; notifications are missed until `listening` is called again. */
  lost?(err?: Error): void;
}

/**
 * A dedicated connection LISTENing on one channel that comes back by itself: when PostgreSQL restarts
 * (or the connection drops), it reconnects every second until it listens again.
 */
export class PgListener {
  private client?: pg.Client;
  private retry?: NodeJS.Timeout;
  private closed = false;

  constructor(
    private readonly databaseUrl: string,
    private readonly channel: string,
    private readonly events: ListenerEvents,
    private readonly log: Logger,
    /** Said once per outage, in the warning. */
    private readonly what: string,
  ) {}

  get isListening(): boolean {
    return this.client !== undefined;
  }

  /** Resolves once the first attempt is over; when it failed, reconnecting goes on in the background. */
  async start(): Promise<void> {
    await this.connect();
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.databaseUrl });
    client.on('notification', (msg) => this.events.notification(msg.payload ?? ''));
    client.on('error', (err) => this.lose(client, err));
    client.on('end', () => this.lose(client));
    try {
      await client.connect();
      await client.query(`LISTEN ${this.channel}`);
      if (this.closed) return void (await client.end().catch(() => {}));
      this.client = client;
      this.events.listening?.();
    } catch (err) {
      this.lose(client, err as Error);
    }
  }

  private lose(client: pg.Client, err?: Error): void {
    if (this.client && this.client !== client) return;
    const wasListening = this.client === client;
    this.client = undefined;
    client.end().catch(() => {});
    if (wasListening) {
      this.events.lost?.(err);
      this.log.warn({ err, channel: this.channel }, `${this.what} lost its PostgreSQL listener; reconnecting every second`);
    }
    if (this.closed || this.retry) return;
    this.retry = setTimeout(() => {
      this.retry = undefined;
      void this.connect();
    }, 1000);
    this.retry.unref();
  }

  async stop(): Promise<void> {
    this.closed = true;
    if (this.retry) clearTimeout(this.retry);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => {});
  }
}
