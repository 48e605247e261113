/** sqlTransaction: the lean transaction /v1/send uses, against a real PostgreSQL database. */
import pino from 'pino';
import { createOrm, type Orm, sql, sqlTransaction } from '../../src/db/orm';
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
const backend = async (em: Parameters<typeof sql>[0]) =>
  (await sql<{ pid: number; xid: string }>(em, `SELECT pg_backend_pid() AS pid, pg_current_xact_id()::text AS xid`))[0];

test('statements share one connection and one transaction, and are seen by others only after COMMIT', async () => {
  const seen = await sqlTransaction(orm.em.fork(), async (tx) => {
    const first = await backend(tx);
    await sql(tx, `INSERT INTO tx_probe (k) VALUES (?)`, ['a']);
    expect(await keys()).toEqual([]);
    // A nested sqlTransaction joins this one.
    await sqlTransaction(tx, (inner) => sql(inner, `INSERT INTO tx_probe (k) VALUES (?)`, ['b']));
    expect(await backend(tx)).toEqual(first);
    return first;
  });
  expect(seen.xid).toMatch(/^\d+$/);
  expect(await keys()).toEqual(['a', 'b']);
});

test("what the callback wrote is rolled back when it throws, and the error is the callback's own", async () => {
  await expect(
    sqlTransaction(orm.em.fork(), async (tx) => {
      await sql(tx, `INSERT INTO tx_probe (k) VALUES (?)`, ['c']);
      throw new Error('refused after writing');
    }),
  ).rejects.toThrow('refused after writing');
  // A failed statement (a duplicate key) aborts the transaction: nothing of it stays.
  await expect(
    sqlTransaction(orm.em.fork(), async (tx) => {
      await sql(tx, `INSERT INTO tx_probe (k) VALUES (?)`, ['d']);
      await sql(tx, `INSERT INTO tx_probe (k) VALUES (?)`, ['a']);
    }),
  ).rejects.toMatchObject({ code: '23505' });
  expect(await keys()).toEqual(['a', 'b']);
  // The connections went back to the pool usable: both of them serve new transactions.
  await Promise.all(['e', 'f'].map((k) => sqlTransaction(orm.em.fork(), (tx) => sql(tx, `INSERT INTO tx_probe (k) VALUES (?)`, [k]))));
  expect(await keys()).toEqual(['a', 'b', 'e', 'f']);
});

test('inside a MikroORM transaction it joins that transaction', async () => {
  await expect(
    orm.em.fork().transactional(async (tx) => {
      await sqlTransaction(tx, (inner) => sql(inner, `INSERT INTO tx_probe (k) VALUES (?)`, ['g']));
      throw new Error('the outer transaction fails');
    }),
  ).rejects.toThrow('the outer transaction fails');
  expect(await keys()).not.toContain('g');
});
