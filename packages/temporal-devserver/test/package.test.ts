/**
 * The package stands alone: its sources import only each other, Node's modules and the dependencies
 * its package.json declares (never the service around it), and its `exports` offer its entry point
 * only, so nobody reaches into its internals by package name.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const ROOT = path.join(__dirname, '..');
const SRC = path.join(ROOT, 'src');
const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { name: string; dependencies: Record<string, string> };

const sourceFiles = (dir: string): string[] =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    return e.isDirectory() ? sourceFiles(full) : e.name.endsWith('.ts') ? [full] : [];
  });

test('its sources import only each other, Node and the dependencies its package.json declares (each of them)', () => {
  const declared = new Set(Object.keys(pkg.dependencies));
  const used = new Set<string>();
  const stray: string[] = [];
  for (const file of sourceFiles(SRC)) {
    for (const [, spec] of fs.readFileSync(file, 'utf8').matchAll(/(?:\bfrom\s+|\bimport\s*\(\s*|\brequire\s*\(\s*|^import\s+)'([^']+)'/gm)) {
      const where = `${path.relative(ROOT, file)}: ${spec}`;
      if (spec.startsWith('.')) {
        if (!path.resolve(path.dirname(file), spec).startsWith(SRC + path.sep)) stray.push(where);
      } else if (!spec.startsWith('node:')) {
        const name = spec
          .split('/')
          .slice(0, spec.startsWith('@') ? 2 : 1)
          .join('/');
        if (!declared.has(name)) stray.push(where);
        used.add(name);
      }
    }
  }
  expect(stray).toEqual([]);
  expect([...used].sort()).toEqual([...declared].sort());
});

test('by name it resolves to its entry point only; a deep import does not resolve', () => {
  // Node's own resolution, as the service's code meets it (the package refers to itself by name here).
  const resolve = (spec: string) =>
    spawnSync(process.execPath, ['--conditions=@postbox/source', '-e', `console.log(require.resolve(${JSON.stringify(spec)}))`], {
      cwd: ROOT,
      encoding: 'utf8',
    });
  const entry = resolve(pkg.name);
  expect(entry.stderr).toBe('');
  expect(entry.stdout.trim()).toBe(path.join(SRC, 'index.ts'));
  for (const deep of ['dist/proto', 'dist/http/ui-server.js', 'src/proto', 'src/http/ui-server.ts']) {
    const r = resolve(`${pkg.name}/${deep}`);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('ERR_PACKAGE_PATH_NOT_EXPORTED');
  }
});
