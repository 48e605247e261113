import { execFileSync, spawnSync } from 'node:child_process';
import path from 'node:path';
import { unsupportedNode } from '../../src/node-version';

test('Node 24 and later are supported; an older Node is refused with how to get Node 24', () => {
  expect(unsupportedNode('24.21.0')).toBeUndefined();
  expect(unsupportedNode('26.1.0')).toBeUndefined();
  expect(unsupportedNode('20.20.2')).toMatch(/needs Node 24 or newer; this is Node 20\.20\.2.*npm install.*npm start/);
});

/** The machine's own `node` outside npm's scripts (CI machines carry Node 20), when it is older than 24. */
function olderSystemNode(): string | undefined {
  for (const candidate of ['/usr/bin/node', '/usr/local/bin/node']) {
    try {
      const major = Number(execFileSync(candidate, ['-p', 'process.versions.node.split(".")[0]'], { encoding: 'utf8' }).trim());
      if (major < 24) return candidate;
    } catch {
      // Not there.
    }
  }
  return undefined;
}

const older = olderSystemNode();
(older ? test : test.skip)('the service started on an older Node exits at once with that message, before touching anything', () => {
  const main = path.join(__dirname, '../../dist/src/main.js');
  const run = spawnSync(older!, [main], { encoding: 'utf8', timeout: 30_000, env: { ...process.env, DATA_DIR: '/nonexistent/never-created' } });
  expect(run.status).toBe(1);
  expect(run.stderr).toMatch(/^postbox needs Node 24 or newer; this is Node \d+\./);
});
