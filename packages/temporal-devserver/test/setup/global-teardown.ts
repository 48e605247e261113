import fs from 'node:fs';
import { CLUSTER_GLOBAL } from './global-setup';

export default async function globalTeardown(): Promise<void> {
  const cluster = (globalThis as Record<string, unknown>)[CLUSTER_GLOBAL] as { pg: { stop(): Promise<void> }; dir: string } | undefined;
  if (!cluster) return;
  await cluster.pg.stop();
  fs.rmSync(cluster.dir, { recursive: true, force: true });
}
