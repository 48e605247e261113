import pg from 'pg';
import { createTestDatabase } from '../setup/db';

test('a per-file database cloned from the migrated template', async () => {
  const url = await createTestDatabase();
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  const r = await c.query(`SELECT count(*)::int AS n FROM information_schema.tables WHERE table_name = 'contacts'`);
  await c.end();
  expect(r.rows[0].n).toBe(1);
});
