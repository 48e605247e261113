import { MikroORM, type EntityManager } from '@mikro-orm/postgresql';
import { Migrator } from '@mikro-orm/migrations';
import pg from 'pg';
import type { Logger } from 'pino';
import { migrationsList } from '../../migrations';
import { ProjectMemberSchema, ProjectSchema, UserSchema } from '../modules/accounts/accounts.entity';

export type Orm = MikroORM;
export type { EntityManager };

export const entities = [UserSchema, ProjectSchema, ProjectMemberSchema];

export async function createOrm(url: string, opts: { poolMax: number; log: Logger }): Promise<Orm> {
  return MikroORM.init({
    clientUrl: url,
    entities,
    discovery: { warnWhenNoEntities: false },
    extensions: [Migrator],
    migrations: { migrationsList, transactional: true, allOrNothing: true, snapshot: false, silent: true },
    pool: { min: 0, max: opts.poolMax },
    // Timestamps travel as timestamptz; keep the process in UTC terms regardless of TZ.
    timezone: 'Z',
    forceUtcTimezone: true,
    allowGlobalContext: false,
    logger: (msg) => opts.log.debug({ component: 'orm' }, msg),
  });
}

const MIGRATION_LOCK = 727274001;

/** Applies pending migrations; several processes starting at once take turns on an advisory lock. */
export async function migrate(orm: Orm, url: string): Promise<string[]> {
  // The lock is per session, so it lives on a connection of its own rather than the pool's.
  const lock = new pg.Client({ connectionString: url });
  await lock.connect();
  try {
    await lock.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    const done = await orm.getMigrator().up();
    return done.map((m) => m.name);
  } finally {
    await lock.end();
  }
}

/** Runs parameterised SQL (`?` placeholders) on the entity manager's connection or transaction. */
export function sql<T = Record<string, unknown>>(em: EntityManager, text: string, params: unknown[] = []): Promise<T[]> {
  return em.getConnection().execute(text, params as never[], 'all', em.getTransactionContext());
}
