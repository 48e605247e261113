/**
 * One schema truth: the entities say exactly what the migrations made. For every table that has an
 * entity, MikroORM's schema diff against a freshly migrated database is empty, so a change to either
 * that is not made to the other fails here. Statements about tables without an entity yet (dropping
 * them, or their foreign keys) are left out; every other statement is a difference.
 */
import pino from 'pino';
import { createOrm } from '../../src/db/orm';
import { entities } from '../../src/modules/entities';
import { createTestDatabase } from '../setup/db';

test('the schema diff against the entities is empty for every table that has one', async () => {
  const orm = await createOrm(await createTestDatabase(), { entities, poolMax: 2, log: pino({ level: 'silent' }) });
  try {
    const tables = Object.values(orm.getMetadata().getAll()).map((meta) => meta.tableName);
    expect(tables.length).toBeGreaterThan(0);
    const diff = await orm.schema.getUpdateSchemaSQL({ wrap: false });
    const statements = diff
      .split(';')
      .map((s) => s.trim())
      .filter(Boolean);
    const aboutUnmodelled = (s: string) => {
      const table = /^(?:drop table if exists|alter table) "([^"]+)"/.exec(s)?.[1];
      return table !== undefined && !tables.includes(table);
    };
    expect(statements.filter((s) => !aboutUnmodelled(s))).toEqual([]);
  } finally {
    await orm.close();
  }
});
