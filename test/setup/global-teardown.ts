import fs from 'node:fs';

export default async function globalTeardown(): Promise<void> {
  const cluster = (globalThis as Record<string, unknown>).__postboxTestCluster as { pg: { stop(): Promise<void> }; dataDir: string } | undefined;
  if (!cluster) return;
  await cluster.pg.stop();
  fs.rmSync(cluster.dataDir, { recursive: true, force: true });
}
