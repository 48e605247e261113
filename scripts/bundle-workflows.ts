/** Build step: bundles temporal/workflows once, so workers load it instead of bundling at every start. */
import fs from 'node:fs';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { WORKFLOW_BUNDLE, WORKFLOW_INTERCEPTORS } from '../temporal/worker';

async function main(): Promise<void> {
  const { code } = await bundleWorkflowCode({
    workflowsPath: path.resolve(__dirname, '../temporal/workflows/index.js'),
    workflowInterceptorModules: [WORKFLOW_INTERCEPTORS],
    logger: { trace() {}, debug() {}, info() {}, warn: console.warn, error: console.error, log() {} } as never,
  });
  fs.writeFileSync(WORKFLOW_BUNDLE, code);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
