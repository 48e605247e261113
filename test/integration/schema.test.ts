/**
 * One schema truth: the entities say exactly what the migrations made. Every table of a freshly migrated
 * database has an entity, MikroORM's schema diff against the entities is empty, and each index the
 * entities write as SQL (partial, GIN, expression: MikroORM compares those by name only) is the one
 * PostgreSQL holds, word for word. So a change to either side that is not made to the other fails here.
 */
import pino from 'pino';
import { createOrm, type Orm } from '../../src/db/orm';
import { entities } from '../../src/modules/entities';
import { createTestDatabase, dbQuery } from '../setup/db';

let url: string;
let orm: Orm;
beforeAll(async () => {
  url = await createTestDatabase();
  orm = await createOrm(url, { entities, poolMax: 2, log: pino({ level: 'silent' }) });
});
afterAll(async () => {
  await orm.close();
});

const metadata = () => Object.values(orm.getMetadata().getAll());

test('every table the migrations made has an entity', async () => {
  const tables = await dbQuery<{ name: string }>(
    url,
    `SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'mikro_orm_migrations' ORDER BY 1`,
  );
  const modelled = new Set(metadata().map((meta) => meta.tableName));
  expect(tables.map((t) => t.name).filter((t) => !modelled.has(t))).toEqual([]);
});

test("MikroORM's schema diff against the entities is empty", async () => {
  const diff = await orm.schema.getUpdateSchemaSQL({ wrap: false });
  expect(
    diff
      .split(';')
      .map((s) => s.trim())
      .filter(Boolean),
  ).toEqual([]);
});

test('every index written as SQL in an entity is the one PostgreSQL holds', async () => {
  const written = metadata().flatMap((meta) => [...meta.indexes, ...meta.uniques].filter((i) => typeof i.expression === 'string'));
  expect(written.length).toBeGreaterThan(0);
  const held = new Map(
    (await dbQuery<{ name: string; def: string }>(url, `SELECT indexname AS name, indexdef AS def FROM pg_indexes WHERE schemaname = 'public'`)).map((r) => [
      r.name,
      r.def,
    ]),
  );
  for (const index of written) expect({ name: index.name, def: index.expression }).toEqual({ name: index.name, def: held.get(index.name!) });
});
