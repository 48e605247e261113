// The build: the workspace package, then the TypeScript, then the workflow bundle. `npm run build`
// (`--force`) always builds; `npm start`, `npm run cli` and `npm run migrate` build only when an input
// changed since the last build: each input's path, size and modification time are hashed, and the hash
// is kept beside the build. Plain JavaScript, since it runs before anything is compiled.
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const FINGERPRINT = path.join(root, 'dist/.build-inputs');
// What tsconfig.build.json, the workspace package's build and the workflow bundle read.
const INPUTS = [
  'src',
  'temporal',
  'migrations',
  'bench',
  'scripts',
  'test/setup',
  'packages/temporal-devserver/src',
  'packages/temporal-devserver/package.json',
  'packages/temporal-devserver/tsconfig.json',
  'packages/temporal-devserver/tsconfig.build.json',
  'tsconfig.json',
  'tsconfig.build.json',
  'package.json',
  'package-lock.json',
];

function fingerprint() {
  const hash = crypto.createHash('sha256');
  const visit = (rel) => {
    const stat = fs.statSync(path.join(root, rel), { throwIfNoEntry: false });
    if (!stat) return;
    if (stat.isDirectory()) {
      for (const name of fs.readdirSync(path.join(root, rel)).sort()) visit(path.join(rel, name));
    } else {
      hash.update(`${rel}\0${stat.size}\0${stat.mtimeMs}\n`);
    }
  };
  INPUTS.forEach(visit);
  return hash.digest('hex');
}

function run(command, args) {
  const result = spawnSync(command, args, { cwd: root, stdio: 'inherit' });
  if (result.status !== 0) process.exit(result.status ?? 1);
}

const readOrEmpty = (file) => (fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '');
const before = fingerprint();
const force = process.argv.includes('--force');
if (force || !fs.existsSync(path.join(root, 'dist/src/main.js')) || readOrEmpty(FINGERPRINT) !== before) {
  if (!force) process.stderr.write('postbox: building (a source changed since the last build)\n');
  run('npm', ['run', 'build', '--silent', '--workspace', '@postbox/temporal-devserver']);
  run('tsc', ['-p', 'tsconfig.build.json']);
  run(process.execPath, ['dist/scripts/bundle-workflows.js']);
  fs.writeFileSync(FINGERPRINT, before);
}
