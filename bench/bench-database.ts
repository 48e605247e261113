/**
 * For the benches that call the service's own functions without HTTP (bench:send-db,
 * bench:delivery-db): a throwaway embedded PostgreSQL, migrated, with one project whose sender domain
 * `bench.test` is verified (no DKIM key: nothing is delivered from it).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startEmbeddedPostgres } from '../src/db/embedded-postgres';
import { createOrm, migrate, type Orm, sql } from '../src/db/orm';
import { entities } from '../src/modules/entities';
import { createLogger } from '../src/log';
import { createProject, signup } from '../src/modules/accounts/accounts.service';

export interface BenchDatabase {
  orm: Orm;
  projectId: string;
  log: ReturnType<typeof createLogger>;
  stop(): Promise<void>;
}

export async function startBenchDatabase(name: string, poolMax: number): Promise<BenchDatabase> {
  const log = createLogger('warn');
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `postbox-${name}-`));
  const db = await startEmbeddedPostgres({ dataDir, log });
  const orm = await createOrm(db.url, { entities, poolMax, log });
  const stop = async () => {
    await orm.close();
    await db.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    await migrate(orm, db.url);
    const em = orm.em.fork();
    const user = await signup(em, 'bench@example.com', 'bench password');
    const project = await createProject(em, user.id, 'bench');
    await sql(
      em,
      `INSERT INTO domains (id, project_id, domain, status, verification_token, dkim_selector, dkim_private_key, dkim_public_key, spf_value)
       VALUES (gen_random_uuid(), ?, 'bench.test', 'verified', '-', 'pb', '-', '-', '-')`,
      [project.id],
    );
    return { orm, projectId: project.id, log, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
