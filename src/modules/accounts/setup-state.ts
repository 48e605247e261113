import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/orm';

/** The onboarding steps, in the order a new project usually takes them. */
const STEPS = [
  ['verifiedDomain', `EXISTS (SELECT 1 FROM domains WHERE project_id = $1 AND status = 'verified')`],
  ['contact', `EXISTS (SELECT 1 FROM contacts WHERE project_id = $1)`],
  ['event', `EXISTS (SELECT 1 FROM events WHERE project_id = $1)`],
  ['template', `EXISTS (SELECT 1 FROM templates WHERE project_id = $1)`],
  ['emailSent', `EXISTS (SELECT 1 FROM emails WHERE project_id = $1 AND status NOT IN ('QUEUED', 'CANCELLED', 'FAILED'))`],
  ['campaign', `EXISTS (SELECT 1 FROM campaigns WHERE project_id = $1)`],
  ['workflowEnabled', `EXISTS (SELECT 1 FROM workflows WHERE project_id = $1 AND enabled)`],
] as const;

/** `{ steps: { verifiedDomain, contact, ... }, completed, total, done }`, each step true once the project has done it. */
export async function setupState(em: EntityManager, projectId: string) {
  const [row] = await sql<Record<string, boolean>>(
    em,
    `SELECT ${STEPS.map(([name, test]) => `${test.replaceAll('$1', '?')} AS "${name}"`).join(', ')}`,
    STEPS.map(() => projectId),
  );
  const steps = Object.fromEntries(STEPS.map(([name]) => [name, row[name]]));
  const completed = Object.values(steps).filter(Boolean).length;
  return { steps, completed, total: STEPS.length, done: completed === STEPS.length };
}
