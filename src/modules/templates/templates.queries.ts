import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/orm';

/** The SEND_EMAIL workflow steps naming a template: SQL, as it joins another module's tables on a jsonb field. */
export function automationStepsSending(em: EntityManager, projectId: string, templateId: string) {
  return sql<{ id: string; workflowId: string; workflowName: string }>(
    em,
    `SELECT s.id, w.id AS "workflowId", w.name AS "workflowName" FROM workflow_steps s JOIN workflows w ON w.id = s.workflow_id
     WHERE w.project_id = ? AND s.type = 'SEND_EMAIL' AND s.config->>'templateId' = ? ORDER BY w.name, s.id`,
    [projectId, templateId],
  );
}
