import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '../..');
const LAUNCHER = path.join(ROOT, 'bin/postbox');

/**
 * What `bin/postbox <args>` hands to node: a preloaded script reports the Node options and the
 * arguments it got, and exits before the service starts.
 */
function launched(args: string[]): { execArgv: string[]; argv: string[] } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'postbox-launcher-'));
  try {
    const report = path.join(dir, 'report.js');
    fs.writeFileSync(report, 'process.stdout.write(JSON.stringify({ execArgv: process.execArgv, argv: process.argv.slice(1) })); process.exit(0);');
    const run = spawnSync('sh', [LAUNCHER, ...args], {
      encoding: 'utf8',
      timeout: 30_000,
      // The node the service runs on first, as npm start has it.
      env: { ...process.env, PATH: `${path.dirname(process.execPath)}${path.delimiter}${process.env.PATH}`, NODE_OPTIONS: `--require ${report}` },
    });
    expect(run.status).toBe(0);
    return JSON.parse(run.stdout);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const MAIN = path.join(ROOT, 'dist/src/main.js');

test('a worker starts with its young and old generations capped; all and api with V8 defaults', () => {
  expect(launched(['worker'])).toEqual({ execArgv: ['--max-semi-space-size=8', '--max-old-space-size=256'], argv: [MAIN, 'worker'] });
  expect(launched(['api'])).toEqual({ execArgv: [], argv: [MAIN, 'api'] });
  expect(launched([])).toEqual({ execArgv: [], argv: [MAIN] });
});

test("Node options before the role reach node after the worker's caps, so they win", () => {
  expect(launched(['--max-semi-space-size=32', '--stack-trace-limit=50', 'worker'])).toEqual({
    execArgv: ['--max-semi-space-size=8', '--max-old-space-size=256', '--max-semi-space-size=32', '--stack-trace-limit=50'],
    argv: [MAIN, 'worker'],
  });
});
