import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../db/ids';
import { sql } from '../../db/orm';
import { conflict, notFound } from '../../http/errors';
import { assertVerifiedSender } from '../domains';
import type { TrackingOverride } from '../accounts';
import type { CreateTemplate, UpdateTemplate } from './templates.schemas';

export interface TemplateRow {
  id: string;
  project_id: string;
  name: string;
  description: string | null;
  subject: string;
  body: string;
  from_email: string;
  from_name: string | null;
  reply_to: string | null;
  type: 'TRANSACTIONAL' | 'MARKETING' | 'HEADLESS';
  tracking: TrackingOverride | null;
  created_at: Date;
  updated_at: Date;
}

export const toTemplateDto = (t: TemplateRow) => ({
  id: t.id,
  name: t.name,
  description: t.description,
  subject: t.subject,
  body: t.body,
  from: t.from_email,
  fromName: t.from_name,
  replyTo: t.reply_to,
  type: t.type,
  tracking: t.tracking,
  projectId: t.project_id,
  createdAt: new Date(t.created_at).toISOString(),
  updatedAt: new Date(t.updated_at).toISOString(),
});

export async function createTemplate(em: EntityManager, projectId: string, input: CreateTemplate): Promise<TemplateRow> {
  await assertVerifiedSender(em, projectId, input.from);
  const [row] = await sql<TemplateRow>(
    em,
    `INSERT INTO templates (id, project_id, name, description, subject, body, from_email, from_name, reply_to, type, tracking)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb) RETURNING *`,
    [
      newId(),
      projectId,
      input.name,
      input.description ?? null,
      input.subject,
      input.body,
      input.from,
      input.fromName ?? null,
      input.replyTo ?? null,
      input.type ?? 'MARKETING',
      input.tracking ? JSON.stringify(input.tracking) : null,
    ],
  );
  return row;
}

export async function getTemplate(em: EntityManager, projectId: string, id: string): Promise<TemplateRow> {
  const [row] = await sql<TemplateRow>(em, `SELECT * FROM templates WHERE project_id = ? AND id = ?`, [projectId, id]);
  if (!row) throw notFound('Template');
  return row;
}

const COLUMN_OF: Record<keyof UpdateTemplate, string> = {
  name: 'name',
  description: 'description',
  subject: 'subject',
  body: 'body',
  from: 'from_email',
  fromName: 'from_name',
  replyTo: 'reply_to',
  type: 'type',
  tracking: 'tracking',
};

export async function updateTemplate(em: EntityManager, projectId: string, id: string, patch: UpdateTemplate): Promise<TemplateRow> {
  await getTemplate(em, projectId, id);
  if (patch.from) await assertVerifiedSender(em, projectId, patch.from);
  const entries = Object.entries(patch).filter(([, v]) => v !== undefined) as Array<[keyof UpdateTemplate, unknown]>;
  if (entries.length === 0) return getTemplate(em, projectId, id);
  const [row] = await sql<TemplateRow>(
    em,
    `UPDATE templates SET ${entries.map(([k]) => `${COLUMN_OF[k]} = ?`).join(', ')}, updated_at = now()
     WHERE project_id = ? AND id = ? RETURNING *`,
    [...entries.map(([k, v]) => (k === 'tracking' && v !== null ? JSON.stringify(v) : v)), projectId, id],
  );
  return row;
}

/**
 * Where a template is used: by the SEND_EMAIL steps of workflows. (Campaigns carry their own
 * content; `campaigns` stays for clients that expect it.)
 */
export async function templateUsage(em: EntityManager, projectId: string, templateId: string) {
  const campaigns: Array<{ id: string; name: string; status: string }> = [];
  const workflowSteps = await sql<{ id: string; workflowId: string; workflowName: string }>(
    em,
    `SELECT s.id, w.id AS "workflowId", w.name AS "workflowName" FROM workflow_steps s JOIN workflows w ON w.id = s.workflow_id
     WHERE w.project_id = ? AND s.type = 'SEND_EMAIL' AND s.config->>'templateId' = ? ORDER BY w.name, s.id`,
    [projectId, templateId],
  );
  return { templateId, campaigns, workflowSteps, total: campaigns.length + workflowSteps.length };
}

export async function deleteTemplate(em: EntityManager, projectId: string, id: string): Promise<void> {
  await getTemplate(em, projectId, id);
  const usage = await templateUsage(em, projectId, id);
  if (usage.total > 0) throw conflict('The template is used by campaigns or workflow steps', 'TEMPLATE_IN_USE', { details: usage });
  await sql(em, `DELETE FROM templates WHERE project_id = ? AND id = ?`, [projectId, id]);
}

export async function duplicateTemplate(em: EntityManager, projectId: string, id: string): Promise<TemplateRow> {
  const [row] = await sql<TemplateRow>(
    em,
    `INSERT INTO templates (id, project_id, name, description, subject, body, from_email, from_name, reply_to, type)
     SELECT ?, project_id, name || ' (copy)', description, subject, body, from_email, from_name, reply_to, type
     FROM templates WHERE project_id = ? AND id = ? RETURNING *`,
    [newId(), projectId, id],
  );
  if (!row) throw notFound('Template');
  return row;
}

export interface TemplateListQuery {
  page: number;
  pageSize: number;
  type?: TemplateRow['type'];
  search?: string;
  sort: 'name' | 'created_at' | 'updated_at';
  dir: 'ASC' | 'DESC';
}

const likePattern = (s: string) => `%${s.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

export async function listTemplates(em: EntityManager, projectId: string, q: TemplateListQuery) {
  const where = ['project_id = ?'];
  const params: unknown[] = [projectId];
  if (q.type) {
    where.push('type = ?');
    params.push(q.type);
  }
  if (q.search) {
    where.push('(name ILIKE ? OR description ILIKE ? OR subject ILIKE ?)');
    const p = likePattern(q.search);
    params.push(p, p, p);
  }
  const filter = where.join(' AND ');
  const [{ n }] = await sql<{ n: string }>(em, `SELECT count(*) AS n FROM templates WHERE ${filter}`, params);
  const rows = await sql<TemplateRow>(em, `SELECT * FROM templates WHERE ${filter} ORDER BY ${q.sort} ${q.dir}, id ${q.dir} LIMIT ? OFFSET ?`, [
    ...params,
    q.pageSize,
    (q.page - 1) * q.pageSize,
  ]);
  const total = Number(n);
  return { data: rows.map(toTemplateDto), total, page: q.page, pageSize: q.pageSize, totalPages: Math.ceil(total / q.pageSize) };
}
