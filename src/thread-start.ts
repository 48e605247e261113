import path from 'node:path';
import { type ResourceLimits, Worker } from 'node:worker_threads';

/**
 * Starts a worker thread on `<dir>/<name>.js`, the compiled file. Running TypeScript (the tests), a thread has no
 * compiled file to load: it compiles the sources it requires with swc, which the test runner brings.
 */
export function startThread(dir: string, name: string, workerData: unknown, resourceLimits?: ResourceLimits): Worker {
  const compiled = __filename.endsWith('.js');
  const entry = path.join(dir, `${name}${compiled ? '.js' : '.ts'}`);
  if (compiled) return new Worker(entry, { workerData, resourceLimits });
  const swc = require.resolve('@swc/core', { paths: [__dirname] });
  const loader = `
    const fs = require('node:fs');
    const { transformSync } = require(${JSON.stringify(swc)});
    require.extensions['.ts'] = (m, filename) => m._compile(transformSync(fs.readFileSync(filename, 'utf8'), {
      filename, jsc: { parser: { syntax: 'typescript' }, target: 'es2022' }, module: { type: 'commonjs' },
    }).code, filename);
    require(${JSON.stringify(entry)});`;
  return new Worker(loader, { eval: true, workerData, resourceLimits });
}
