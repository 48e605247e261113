import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/orm';
import type { TokenPurpose } from './account-emails';
import type { KeyOwner } from './project-keys';

// The accounts module's hand-written SQL: each statement says why the EntityManager does not make it.

/** SQL: every API request whose key the cache misses waits on this, so it skips the entity's hydration. */
export async function projectByKey(em: EntityManager, kind: 'public' | 'secret', key: string): Promise<KeyOwner | undefined> {
  const [row] = await sql<{ id: string; disabled: boolean; disabled_reason: string | null }>(
    em,
    kind === 'public'
      ? `SELECT id, disabled, disabled_reason FROM projects WHERE public_key = ?`
      : `SELECT id, disabled, disabled_reason FROM projects WHERE secret_key = ?`,
    [key],
  );
  return row && { projectId: row.id, disabled: row.disabled, disabledReason: row.disabled_reason };
}

/** SQL: one conditional UPDATE uses the token, so two requests with the same link cannot both pass. */
export async function useToken(em: EntityManager, tokenHash: string, purpose: TokenPurpose): Promise<string | undefined> {
  const [row] = await sql<{ user_id: string }>(
    em,
    `UPDATE auth_tokens SET used_at = now() WHERE token_hash = ? AND purpose = ? AND used_at IS NULL AND expires_at > now() RETURNING user_id`,
    [tokenHash, purpose],
  );
  return row?.user_id;
}

/**
 * Everything a project holds, in an order its foreign keys accept (campaigns before the segments
 * they RESTRICT, everything hanging off contacts by cascade). The project, its keys, its members
 * and invitations, and its rate-limit window stay.
 */
const PROJECT_DATA = [
  // Its deliveries go with it (cascade).
  'webhook_endpoints',
  'automation_outbox',
  'workflows',
  'campaigns',
  // Each contact's choice in a topic goes with it (cascade).
  'topics',
  'segments',
  'templates',
  'domains',
  'contacts',
  'events',
  'emails',
  'contact_counts',
  // After `contacts`, whose deletion writes the deltas.
  'contact_count_deltas',
  'bulk_jobs',
  'contact_imports',
  'idempotency_keys',
];

/** SQL: bulk deletes from other modules' tables, named here so that this module imports none of their entities. */
export async function deleteProjectData(tx: EntityManager, projectId: string, opts: { activityCounts: boolean }): Promise<void> {
  for (const table of PROJECT_DATA) await sql(tx, `DELETE FROM ${table} WHERE project_id = ?`, [projectId]);
  if (opts.activityCounts) await sql(tx, `DELETE FROM activity_count_deltas WHERE project_id = ?`, [projectId]);
}

/** The onboarding steps, in the order a new project usually takes them. */
const SETUP_STEPS = [
  ['verifiedDomain', `EXISTS (SELECT 1 FROM domains WHERE project_id = $1 AND status = 'verified')`],
  ['contact', `EXISTS (SELECT 1 FROM contacts WHERE project_id = $1)`],
  ['event', `EXISTS (SELECT 1 FROM events WHERE project_id = $1)`],
  ['template', `EXISTS (SELECT 1 FROM templates WHERE project_id = $1)`],
  ['emailSent', `EXISTS (SELECT 1 FROM emails WHERE project_id = $1 AND status NOT IN ('QUEUED', 'CANCELLED', 'FAILED', 'SUPPRESSED'))`],
  ['campaign', `EXISTS (SELECT 1 FROM campaigns WHERE project_id = $1)`],
  ['workflowEnabled', `EXISTS (SELECT 1 FROM workflows WHERE project_id = $1 AND enabled)`],
] as const;

export type SetupStep = (typeof SETUP_STEPS)[number][0];

/** SQL: seven EXISTS tests over other modules' tables in one round trip; each step, true once the project has done it. */
export async function setupSteps(em: EntityManager, projectId: string): Promise<Record<SetupStep, boolean>> {
  const [row] = await sql<Record<SetupStep, boolean>>(
    em,
    `SELECT ${SETUP_STEPS.map(([name, test]) => `${test.replaceAll('$1', '?')} AS "${name}"`).join(', ')}`,
    SETUP_STEPS.map(() => projectId),
  );
  return Object.fromEntries(SETUP_STEPS.map(([name]) => [name, row[name]])) as Record<SetupStep, boolean>;
}
