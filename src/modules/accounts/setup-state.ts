import type { EntityManager } from '@mikro-orm/postgresql';
import { setupSteps } from './accounts.queries';

/** `{ steps: { verifiedDomain, contact, ... }, completed, total, done }`, each step true once the project has done it. */
export async function setupState(em: EntityManager, projectId: string) {
  const steps = await setupSteps(em, projectId);
  const total = Object.keys(steps).length;
  const completed = Object.values(steps).filter(Boolean).length;
  return { steps, completed, total, done: completed === total };
}
