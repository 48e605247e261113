import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { startEmbeddedPostgres } from '../../src/db/embedded-postgres';
import { createOrm, migrate } from '../../src/db/orm';
import { entities } from '../../src/modules/entities';

export const TEMPLATE_DB = 'postbox_template';

/**
 * One real PostgreSQL cluster for the whole run, with a migrated template database; each test file
 * clones the template into a database of its own (see test/setup/db.ts).
 */
export default async function globalSetup(): Promise<void> {
  const log = pino({ level: process.env.TEST_LOG_LEVEL ?? 'warn' });
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'postbox-test-'));
  const pg = await startEmbeddedPostgres({
    dataDir,
    database: TEMPLATE_DB,
    log,
    settings: { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off', max_connections: '400' },
  });
  const orm = await createOrm(pg.url, { entities, poolMax: 2, log });
  await migrate(orm, pg.url);
  await orm.close();
  process.env.TEST_PG_TEMPLATE_URL = pg.url;
  (globalThis as Record<string, unknown>).__postboxTestCluster = { pg, dataDir };
}
