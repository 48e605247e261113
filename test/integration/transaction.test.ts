/** transaction(): the one transaction API, for sql() statements and MikroORM's own queries alike, against a real PostgreSQL database. */
import crypto from 'node:crypto';
import pino from 'pino';
import { createOrm, type Orm, sql, transaction } from '../../src/db/orm';
import { User } from '../../src/modules/accounts/accounts.entity';
import { entities } from '../../src/modules/entities';
import { createTestDatabase, dbQuery } from '../setup/db';

let url: string;
let orm: Orm;
beforeAll(async () => {
  url = await createTestDatabase();
  // Two connections, so a statement that escaped the transaction would run on the other one.
  orm = await createOrm(url, { entities, poolMax: 2, log: pino({ level: 'silent' }) });
  await sql(orm.em.fork(), `CREATE TABLE tx_probe (k text PRIMARY KEY)`);
});
afterAll(async () => {
  await orm.close(true);
});

const keys = async () => (await dbQuery<{ k: string }>(url, `SELECT k FROM tx_probe ORDER BY k`)).map((r) => r.k);
const users = async (email: string) => (await dbQuery<{ email: string }>(url, `SELECT email FROM users WHERE email = $1`, [email])).length;
const BACKEND = `SELECT pg_backend_pid() AS pid, pg_current_xact_id()::text AS xid`;
const backend = async (em: Parameters<typeof sql>[0]) => (await sql<{ pid: number; xid: string }>(em, BACKEND))[0];
const newUser = (email: string) => Object.assign(new User(), { id: crypto.randomUUID(), email, passwordHash: 'x' });

test('statements share one connection and one transaction, and are seen by others only after COMMIT', async () => {
  const seen = await transaction(orm.em.fork(), async (tx) => {
    const first = await backend(tx);
    await sql(tx, `INSERT INTO tx_probe (k) VALUES (?)`, ['a']);
    expect(await keys()).toEqual([]);
    // A nested transaction joins this one.
    await transaction(tx, (inner) => sql(inner, `INSERT INTO tx_probe (k) VALUES (?)`, ['b']));
    expect(await backend(tx)).toEqual(first);
    return first;
  });
  expect(seen.xid).toMatch(/^\d+$/);
  expect(await keys()).toEqual(['a', 'b']);
});

test("MikroORM's queries on the callback's entity manager run in the same transaction, and what it persisted is flushed at COMMIT", async () => {
  const email = `tx-${Date.now()}@example.com`;
  await transaction(orm.em.fork(), async (tx) => {
    const viaSql = await backend(tx);
    // MikroORM's own path (its connection, the transaction context) reaches the same backend and transaction.
    const [viaOrm] = await tx.execute<Array<{ pid: number; xid: string }>>(BACKEND);
    expect(viaOrm).toEqual(viaSql);
    tx.persist(newUser(email));
    await tx.flush();
    expect(await tx.count(User, { email })).toBe(1);
    expect(await users(email)).toBe(0);
    // Persisted, not flushed: the commit flushes it.
    tx.persist(newUser(`second-${email}`));
  });
  expect(await users(email)).toBe(1);
  expect(await users(`second-${email}`)).toBe(1);
});

test("what the callback wrote is rolled back when it throws, and the error is the callback's own", async () => {
  await expect(
    transaction(orm.em.fork(), async (tx) => {
      await sql(tx, `INSERT INTO tx_probe (k) VALUES (?)`, ['c']);
      throw new Error('refused after writing');
    }),
  ).rejects.toThrow('refused after writing');
  const email = `rolled-back-${Date.now()}@example.com`;
  await expect(
    transaction(orm.em.fork(), async (tx) => {
      tx.persist(newUser(email));
      await tx.flush();
      throw new Error('refused after flushing');
    }),
  ).rejects.toThrow('refused after flushing');
  expect(await users(email)).toBe(0);
  // A failed statement (a duplicate key) aborts the transaction: nothing of it stays.
  await expect(
    transaction(orm.em.fork(), async (tx) => {
      await sql(tx, `INSERT INTO tx_probe (k) VALUES (?)`, ['d']);
      await sql(tx, `INSERT INTO tx_probe (k) VALUES (?)`, ['a']);
    }),
  ).rejects.toMatchObject({ code: '23505' });
  expect(await keys()).toEqual(['a', 'b']);
  // The connections went back to the pool usable: both of them serve new transactions, again and again.
  for (const round of ['e', 'g']) {
    await Promise.all([round, round + round].map((k) => transaction(orm.em.fork(), (tx) => sql(tx, `INSERT INTO tx_probe (k) VALUES (?)`, [k]))));
  }
  expect(await keys()).toEqual(['a', 'b', 'e', 'ee', 'g', 'gg']);
});

test('outside a transaction, MikroORM and sql() run on their own (autocommit)', async () => {
  const em = orm.em.fork();
  expect((await backend(em)).xid).not.toEqual((await backend(em)).xid);
});
