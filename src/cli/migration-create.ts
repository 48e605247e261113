import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startEmbeddedPostgres } from '../db/embedded-postgres';
import { createOrm, migrate } from '../db/orm';
import { createLogger } from '../log';
import { entities } from '../modules/entities';

/**
 * `npm run migration:create -- <name>`: writes the migration that takes the schema from what the
 * migrations make to what the entities say, for review. It migrates a throwaway embedded PostgreSQL,
 * diffs the entities against it with MikroORM's migrator, writes `migrations/Migration<time>_<name>.ts`
 * and lists it in `migrations/index.ts`. `--check` writes nothing and exits 1 when they differ.
 */
async function main(): Promise<number> {
  const args = process.argv.slice(2);
  const check = args.includes('--check');
  const name = args.find((a) => !a.startsWith('--'));
  if (!check && !/^[a-z][a-z0-9_]*$/.test(name ?? '')) {
    process.stderr.write('usage: npm run migration:create -- <name in snake_case>   (or -- --check)\n');
    return 2;
  }
  const log = createLogger('warn');
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'postbox-migration-'));
  const db = await startEmbeddedPostgres({ dataDir, log });
  const dir = path.resolve(__dirname, '../../../migrations');
  try {
    const orm = await createOrm(db.url, { entities, poolMax: 2, log });
    try {
      await migrate(orm, db.url);
      const diff = await orm.schema.getUpdateSchemaSQL({ wrap: false });
      if (!diff.trim()) {
        process.stdout.write('The entities and the migrations agree: nothing to generate.\n');
        return 0;
      }
      if (check) {
        process.stdout.write(`The entities and the migrations differ:\n${diff}\n`);
        return 1;
      }
      const created = await orm.getMigrator().createMigration(dir, false, false, name);
      register(dir, created.fileName.replace(/\.ts$/, ''));
      process.stdout.write(`Wrote migrations/${created.fileName} and listed it in migrations/index.ts; review it before committing.\n`);
      return 0;
    } finally {
      await orm.close();
    }
  } finally {
    await db.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

/** Appends the migration to `migrations/index.ts`, whose list is what the service runs. */
function register(dir: string, migration: string): void {
  const index = path.join(dir, 'index.ts');
  const text = fs.readFileSync(index, 'utf8');
  const imports = text.lastIndexOf('\nimport ') + 1;
  const afterImports = text.indexOf('\n', imports) + 1;
  const withImport = `${text.slice(0, afterImports)}import { ${migration} } from './${migration}';\n${text.slice(afterImports)}`;
  const end = withImport.lastIndexOf('];');
  fs.writeFileSync(index, `${withImport.slice(0, end)}  { name: '${migration}', class: ${migration} },\n${withImport.slice(end)}`);
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`migration:create failed: ${(err as Error).message}\n`);
    process.exit(1);
  },
);
