/**
 * The conformance suite against the dev server in durable mode: every operation is written to a
 * real PostgreSQL before it answers, closed runs are read back from it, visibility is SQL.
 */
import { conformanceSuite } from './conformance';
import { createTestDatabase } from './helpers/postgres';

conformanceSuite('dev server, durable in PostgreSQL', {
  server: async () => ({ persistence: { kind: 'postgres', url: await createTestDatabase() }, maxClosedInMemory: 5 }),
});
