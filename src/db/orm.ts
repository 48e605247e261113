import { MikroORM, type EntityManager, type EntitySchema } from '@mikro-orm/postgresql';
import { Migrator } from '@mikro-orm/migrations';
import crypto from 'node:crypto';
import type { Knex } from '@mikro-orm/knex';
import pg from 'pg';
import type { Logger } from 'pino';
import { migrationsList } from '../../migrations';

export type Orm = MikroORM;
export type { EntityManager };

/** MikroORM reads host and port from the URL itself, so a Unix socket (`?host=/dir`) is passed apart. */
function connectionOptions(url: string) {
  const u = new URL(url);
  const socket = u.searchParams.get('host');
  if (!socket?.startsWith('/')) return { clientUrl: url };
  return {
    host: socket,
    port: Number(u.port || 5432),
    user: decodeURIComponent(u.username),
    password: decodeURIComponent(u.password),
    dbName: decodeURIComponent(u.pathname.slice(1)),
  };
}

/** `entities`: every module's entity schemas (src/modules/entities.ts), so the base names no module itself. */
export async function createOrm(url: string, opts: { poolMax: number; log: Logger; entities: EntitySchema[] }): Promise<Orm> {
  return MikroORM.init({
    ...connectionOptions(url),
    entities: opts.entities,
    discovery: { warnWhenNoEntities: false },
    extensions: [Migrator],
    migrations: { migrationsList, transactional: true, allOrNothing: true, snapshot: false, silent: true },
    pool: { min: 0, max: opts.poolMax },
    // knex otherwise writes its warnings to the console.
    driverOptions: {
      log: {
        warn: (m: unknown) => opts.log.warn({ component: 'knex' }, String(m)),
        error: (m: unknown) => opts.log.error({ component: 'knex' }, String(m)),
        deprecate: (m: unknown) => opts.log.debug({ component: 'knex' }, String(m)),
        debug: (m: unknown) => opts.log.debug({ component: 'knex' }, String(m)),
      },
    },
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

interface PreparedText {
  text: string;
  name: string;
}
const prepared = new Map<string, PreparedText>();

/** `?` placeholders become `$1..$n` by knex's own binding rule (`\\?` is a literal `?`); the statement is named by its text's hash. */
function prepare(em: EntityManager, source: string): PreparedText {
  let found = prepared.get(source);
  if (found) return found;
  const text = (em.getConnection().getKnex().client as { positionBindings(sql: string): string }).positionBindings(source);
  found = { text, name: 'q' + crypto.createHash('sha1').update(text).digest('hex').slice(0, 20) };
  prepared.set(source, found);
  return found;
}

type PooledClient = { acquireConnection(): Promise<pg.PoolClient>; releaseConnection(c: pg.PoolClient): Promise<void> };
const pooled = (knex: Knex | Knex.Transaction) => knex.client as PooledClient;

/** The connection each `transaction` holds, by the entity manager it hands its callback. */
const transactions = new WeakMap<EntityManager, pg.PoolClient>();

/**
 * Runs SQL with server-side parameters (knex's `?` placeholders, bound by the driver, never inlined) on the
 * entity manager's connection, inside its transaction when it has one.
 * Statements are prepared once per connection (named by their text), which halves the cost of the hot
 * paths compared with unnamed statements. `EntityManager.execute` is not used because it formats
 * parameters into the SQL text. A literal `?` (the jsonb operator, a jsonpath filter) is written `\\?`.
 */
export async function sql<T = Record<string, unknown>>(em: EntityManager, text: string, params: unknown[] = []): Promise<T[]> {
  const statement = prepare(em, text);
  const held = transactions.get(em);
  if (held) return (await held.query<T & pg.QueryResultRow>({ name: statement.name, text: statement.text, values: params })).rows;
  const client = pooled(em.getTransactionContext<Knex.Transaction>() ?? em.getConnection().getKnex());
  const conn = await client.acquireConnection();
  try {
    const result = await conn.query<T & pg.QueryResultRow>({ name: statement.name, text: statement.text, values: params });
    return result.rows;
  } finally {
    await client.releaseConnection(conn);
  }
}

/** Whether `em` runs in a transaction, which someone else commits. */
export const insideTransaction = (em: EntityManager): boolean => transactions.has(em) || !!em.getTransactionContext();

/**
 * For each pooled connection, a knex transaction object bound to it that never begins or ends on its
 * own: `transaction` sends BEGIN and COMMIT itself and lends it to MikroORM, whose queries (find, flush,
 * QueryBuilder) then run on the transaction's connection. Made once per connection, not per transaction.
 */
const boundContexts = new WeakMap<pg.PoolClient, Knex.Transaction>();

function boundContext(knex: Knex, conn: pg.PoolClient): Promise<Knex.Transaction> {
  const found = boundContexts.get(conn);
  if (found) return Promise.resolve(found);
  return new Promise((resolve, reject) => {
    type Bound = Promise<unknown> & { begin(): Promise<void> };
    const trx = (knex.client as { transaction(container: (t: Knex.Transaction) => Promise<never>, config: object): Bound }).transaction(
      (t) => {
        boundContexts.set(conn, t);
        resolve(t);
        return new Promise<never>(() => undefined); // never commits: COMMIT is transaction()'s
      },
      { connection: conn, userParams: {}, doNotRejectOnRollback: true },
    );
    // knex begins after a tick; BEGIN is transaction()'s own.
    trx.begin = () => Promise.resolve();
    trx.catch(reject);
  });
}

/**
 * The one way to run a transaction. `fn` gets an entity manager whose every query runs in it: `sql()`
 * statements on the transaction's connection, and MikroORM's own (find, persist and flush, QueryBuilder)
 * through the same connection; what `fn` persisted is flushed before COMMIT, and ROLLBACK undoes all when
 * `fn` throws. BEGIN and COMMIT go straight to the driver, which costs a fraction of MikroORM's and
 * knex's transaction machinery (`npm run bench:pg-roundtrip`). Inside a transaction already, `fn` joins it.
 */
export async function transaction<T>(em: EntityManager, fn: (tx: EntityManager) => Promise<T>): Promise<T> {
  if (insideTransaction(em)) return fn(em);
  const knex = em.getConnection().getKnex();
  const client = pooled(knex);
  const conn = await client.acquireConnection();
  const tx = em.fork({ clear: false });
  transactions.set(tx, conn);
  try {
    tx.setTransactionContext(await boundContext(knex, conn));
    await conn.query('BEGIN');
    let result: T;
    try {
      result = await fn(tx);
      await tx.flush();
    } catch (err) {
      // A connection that broke is marked by knex itself (its 'error' and 'end' listeners) and dropped by the pool.
      await conn.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
    await conn.query('COMMIT');
    return result;
  } finally {
    transactions.delete(tx);
    tx.resetTransactionContext();
    await client.releaseConnection(conn);
  }
}

/** PostgreSQL's SQLSTATE for a unique violation. */
export const isUniqueViolation = (err: unknown): boolean => (err as { code?: string })?.code === '23505';

/** PostgreSQL's SQLSTATE for a foreign-key violation. */
export const isForeignKeyViolation = (err: unknown): boolean => (err as { code?: string })?.code === '23503';

/**
 * Commit barrier for a workflow started inside the transaction that writes its row (started before
 * the commit, so that a failed start writes nothing): the writer holds `key` until it commits or
 * rolls back, and a workflow's activity that finds no row waits for that (`awaitCommit`) before it
 * concludes that the row does not exist.
 */
export async function holdUntilCommit(tx: EntityManager, key: string): Promise<void> {
  await sql(tx, `SELECT pg_advisory_xact_lock(hashtext(?))`, [key]);
}

export async function awaitCommit(em: EntityManager, key: string): Promise<void> {
  await transaction(em.fork(), (tx) => sql(tx, `SELECT pg_advisory_xact_lock_shared(hashtext(?))`, [key]));
}

/** Runs `read`; when it finds nothing, waits for the writer holding `key` to end, then reads once more. */
export async function readAfterCommit<T>(em: EntityManager, key: string, read: () => Promise<T | undefined>): Promise<T | undefined> {
  const found = await read();
  if (found !== undefined) return found;
  await awaitCommit(em, key);
  return read();
}
