/**
 * Modules meet through their index.ts, and some of them import each other. Whichever is loaded first,
 * every public file must load: a cycle that reads a value before it is initialised fails here, not at
 * a user's first start.
 */
import fs from 'node:fs';
import path from 'node:path';

const src = path.join(__dirname, '..', '..', 'src');
const publicFiles = [
  ...fs
    .readdirSync(path.join(src, 'modules'), { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .map((d) => path.join(src, 'modules', d.name, 'index.ts')),
  path.join(src, 'delivery', 'index.ts'),
  path.join(src, 'inbound', 'inbound-reports.ts'),
];

test.each(publicFiles.map((f) => [path.relative(src, f), f]))('%s loads first', (_name, file) => {
  jest.isolateModules(() => {
    expect(() => require(file)).not.toThrow();
  });
});
