import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/orm';

/**
 * Where a sender domain is in use: templates, campaigns not yet finished, workflow steps sending from it.
 * SQL: it reads other modules' tables by the domain part of an address (as templates' split_part
 * expression index has it) and joins workflow steps to templates on a jsonb field.
 */
export async function domainUsage(em: EntityManager, projectId: string, domain: string) {
  const templates = await sql<{ id: string; name: string }>(
    em,
    `SELECT id, name FROM templates WHERE project_id = ? AND split_part(from_email, '@', 2) = ? ORDER BY name`,
    [projectId, domain],
  );
  const campaigns = await sql<{ id: string; name: string; status: string }>(
    em,
    `SELECT id, name, status FROM campaigns WHERE project_id = ? AND split_part(from_email, '@', 2) = ?
       AND status IN ('DRAFT', 'SCHEDULED', 'SENDING', 'TESTING') ORDER BY name`,
    [projectId, domain],
  );
  const workflowSteps = await sql<{ id: string; workflowId: string }>(
    em,
    `SELECT s.id, s.workflow_id AS "workflowId" FROM workflow_steps s JOIN workflows w ON w.id = s.workflow_id
     JOIN templates t ON t.id::text = s.config->>'templateId'
     WHERE w.project_id = ? AND s.type = 'SEND_EMAIL' AND split_part(t.from_email, '@', 2) = ?`,
    [projectId, domain],
  );
  return { templates, campaigns, workflowSteps };
}
