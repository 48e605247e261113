import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import { PgListener } from '../../db/listener';
import { projectByKey } from './accounts.queries';

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
  private readonly listener: PgListener;

  constructor(databaseUrl: string, log: Logger) {
    this.listener = new PgListener(
      databaseUrl,
      PROJECT_CHANGED_CHANNEL,
      {
        notification: (projectId) => this.forgetProject(projectId),
        // Whatever changed while nobody listened: forget everything.
        lost: () => this.forgetAll(),
      },
      log,
      'the API key cache',
    );
  }

  async start(): Promise<void> {
    await this.listener.start();
  }

  private forgetAll(): void {
    this.generation++;
    this.entries.clear();
  }

  forgetProject(projectId: string): void {
    this.generation++;
    for (const [key, owner] of this.entries) if (owner.projectId === projectId) this.entries.delete(key);
  }

  async lookup(em: EntityManager, kind: 'public' | 'secret', key: string): Promise<KeyOwner | undefined> {
    const hit = this.entries.get(key);
    if (hit && this.listener.isListening && Date.now() - hit.at < TTL_MS) return hit;
    const generation = this.generation;
    const owner = await projectByKey(em, kind, key);
    if (!owner) return undefined;
    if (this.listener.isListening && generation === this.generation) {
      if (this.entries.size >= MAX_ENTRIES) this.entries.clear();
      this.entries.set(key, { ...owner, at: Date.now() });
    }
    return owner;
  }

  async stop(): Promise<void> {
    await this.listener.stop();
    this.forgetAll();
  }
}
