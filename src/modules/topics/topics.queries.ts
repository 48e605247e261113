import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/orm';
import { Topic } from './topics.entity';

/**
 * The topics module's hand-written SQL: who receives a topic is a clause of the set-based audience
 * queries of campaigns, over `contacts c`; everything else goes through the EntityManager.
 */

/**
 * SQL (on `contacts c`) for the contacts whose state in the topic is 'subscribed': an anti-join (opt_in:
 * no row saying otherwise) or a semi-join (opt_out: a row saying so) on contact_topics' primary key,
 * so an audience of any size stays one index-driven statement. A topic that no longer exists is
 * received by nobody. The caller adds `c.subscribed`, the global flag.
 */
export async function receivesTopicWhere(em: EntityManager, projectId: string, topicId: string, params: unknown[]): Promise<string> {
  const topic = await em.findOne(Topic, { projectId, id: topicId }, { fields: ['defaultSubscription'] });
  if (!topic) return 'FALSE';
  params.push(topicId);
  return topic.defaultSubscription === 'opt_in'
    ? `NOT EXISTS (SELECT 1 FROM contact_topics ct WHERE ct.contact_id = c.id AND ct.topic_id = ? AND ct.state IN ('unsubscribed', 'pending'))`
    : `EXISTS (SELECT 1 FROM contact_topics ct WHERE ct.contact_id = c.id AND ct.topic_id = ? AND ct.state = 'subscribed')`;
}

/** What still sends for a topic: unsent campaigns and SEND_EMAIL steps. SQL, as it reads other modules' tables (a step's jsonb config). */
export async function topicUsers(em: EntityManager, projectId: string, topicId: string) {
  const [campaigns, workflowSteps] = await Promise.all([
    sql<{ id: string; name: string; status: string }>(
      em,
      `SELECT id, name, status FROM campaigns
       WHERE project_id = ? AND topic_id = ? AND status IN ('DRAFT', 'SCHEDULED', 'SENDING', 'TESTING') ORDER BY name, id`,
      [projectId, topicId],
    ),
    sql<{ id: string; workflowId: string; workflowName: string }>(
      em,
      `SELECT s.id, w.id AS "workflowId", w.name AS "workflowName" FROM workflow_steps s JOIN workflows w ON w.id = s.workflow_id
       WHERE w.project_id = ? AND s.type = 'SEND_EMAIL' AND s.config->>'topicId' = ? ORDER BY w.name, s.id`,
      [projectId, topicId],
    ),
  ]);
  return { campaigns, workflowSteps };
}

/**
 * Joins many contacts to opt_out topics at once (an import's slice): one INSERT ... SELECT that leaves
 * every existing choice alone (ON CONFLICT DO NOTHING), so a contact that left a topic is not put back.
 * opt_in topics need no row: a contact without one already receives them. Answers the rows written.
 */
export function joinOptOutTopics(
  em: EntityManager,
  projectId: string,
  contactIds: string[],
  topicIds: string[],
  askConfirmation: boolean,
  projectDoubleOptIn: boolean,
) {
  return sql<{ contact_id: string; topic_id: string; state: 'subscribed' | 'pending' }>(
    em,
    `INSERT INTO contact_topics (contact_id, topic_id, project_id, state, updated_at)
     SELECT c.id, t.id, t.project_id, CASE WHEN ? AND coalesce(t.double_opt_in, ?) THEN 'pending' ELSE 'subscribed' END, now()
     FROM unnest(?::uuid[]) AS c(id) CROSS JOIN topics t
     WHERE t.project_id = ? AND t.id = ANY(?::uuid[]) AND t.default_subscription = 'opt_out'
     ORDER BY c.id, t.id
     ON CONFLICT (contact_id, topic_id) DO NOTHING
     RETURNING contact_id, topic_id, state`,
    [askConfirmation, projectDoubleOptIn, contactIds, projectId, topicIds],
  );
}
