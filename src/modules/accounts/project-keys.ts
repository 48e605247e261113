import type { EntityManager } from '@mikro-orm/postgresql';
import pg from 'pg';
import type { Logger } from 'pino';
import { sql } from '../../db/orm';

/** Notified by a trigger on `projects` whenever keys or status change (see the foundation migration). */
export const PROJECT_CHANGED_CHANNEL = 'postbox_project_changed';

export interface KeyOwner {
  projectId: string;
  disabled: boolean;
  disabledReason: string | null;
}

const MAX_ENTRIES = 10_000;
const TTL_MS = 5 * 60_000;

/**
 * API key → project, cached in this process so a request costs no lookup. Entries are dropped when
 * PostgreSQL notifies that the project changed (rotation, disable, delete, at commit), on any doubt about the
 * listener (then every lookup goes to the database until it is back), and after a few minutes.
 */
export class ProjectKeyCache {
  private readonly entries = new Map<string, KeyOwner & { at: number }>();
  /** Bumped on every invalidation, so a lookup that raced one does not cache what it read. */
  private generation = 0;
  private listener?: pg.Client;
  private listening = false;
  private closed = false;
  private retry?: NodeJS.Timeout;

  constructor(
    private readonly databaseUrl: string,
    private readonly log: Logger,
  ) {}

  async start(): Promise<void> {
    await this.connect();
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.databaseUrl });
    client.on('notification', (msg) => this.forgetProject(msg.payload ?? ''));
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client));
    try {
      await client.connect();
      await client.query(`LISTEN ${PROJECT_CHANGED_CHANNEL}`);
      this.listener = client;
      this.listening = true;
    } catch (err) {
      this.lost(client, err as Error);
    }
  }

  private lost(client: pg.Client, err?: Error): void {
    if (this.listener && this.listener !== client) return;
    this.listening = false;
    this.listener = undefined;
    this.generation++;
    this.entries.clear();
    client.end().catch(() => {});
    if (this.closed || this.retry) return;
    if (err) this.log.warn({ err }, 'API key cache lost its PostgreSQL listener; looking keys up directly until it is back');
    this.retry = setTimeout(() => {
      this.retry = undefined;
      void this.connect();
    }, 1000);
    this.retry.unref();
  }

  forgetProject(projectId: string): void {
    this.generation++;
    for (const [key, owner] of this.entries) if (owner.projectId === projectId) this.entries.delete(key);
  }

  async lookup(em: EntityManager, kind: 'public' | 'secret', key: string): Promise<KeyOwner | undefined> {
    const hit = this.entries.get(key);
    if (hit && this.listening && Date.now() - hit.at < TTL_MS) return hit;
    const column = kind === 'public' ? 'public_key' : 'secret_key';
    const generation = this.generation;
    const [row] = await sql<{ id: string; disabled: boolean; disabled_reason: string | null }>(
      em,
      `SELECT id, disabled, disabled_reason FROM projects WHERE ${column} = ?`,
      [key],
    );
    if (!row) return undefined;
    const owner = { projectId: row.id, disabled: row.disabled, disabledReason: row.disabled_reason };
    if (this.listening && generation === this.generation) {
      if (this.entries.size >= MAX_ENTRIES) this.entries.clear();
      this.entries.set(key, { ...owner, at: Date.now() });
    }
    return owner;
  }

  async stop(): Promise<void> {
    this.closed = true;
    if (this.retry) clearTimeout(this.retry);
    this.entries.clear();
    const client = this.listener;
    this.listener = undefined;
    this.listening = false;
    await client?.end().catch(() => {});
  }
}
