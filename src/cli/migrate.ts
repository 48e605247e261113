import { ConfigError, loadConfig } from '../config';
import { startEmbeddedPostgres } from '../db/embedded-postgres';
import { createOrm, migrate } from '../db/orm';
import { entities } from '../modules/entities';
import { createLogger } from '../log';

/** `npm run migrate`: applies pending migrations to DATABASE_URL (or the embedded cluster) and exits. */
async function main(): Promise<void> {
  const config = loadConfig();
  const log = createLogger(config.LOG_LEVEL);
  let url = config.DATABASE_URL;
  let stop = async () => {};
  if (!url) {
    const pg = await startEmbeddedPostgres({ dataDir: config.dataDir, port: config.EMBEDDED_POSTGRES_PORT, log });
    url = pg.url;
    stop = pg.stop;
  }
  const orm = await createOrm(url, { entities, poolMax: 2, log });
  try {
    const applied = await migrate(orm, url);
    process.stdout.write(applied.length ? `Applied: ${applied.join(', ')}\n` : 'Database is up to date\n');
  } finally {
    await orm.close();
    await stop();
  }
}

main().catch((err) => {
  process.stderr.write(`${err instanceof ConfigError ? err.message : `migration failed: ${(err as Error).message}`}\n`);
  process.exit(1);
});
