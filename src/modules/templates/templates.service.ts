import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../db/ids';
import { containsPattern } from '../../db/like-pattern';
import { conflict, notFound } from '../../errors';
import { assertVerifiedSender } from '../domains';
import { copiedMessage, Template } from './templates.entity';
import { automationStepsSending } from './templates.queries';
import { checkedContent } from './template-content';
import type { CreateTemplate, UpdateTemplate } from './templates.schemas';

export const toTemplateDto = (t: Template) => ({
  id: t.id,
  name: t.name,
  description: t.description,
  subject: t.subject,
  body: t.body,
  format: t.format,
  from: t.fromEmail,
  fromName: t.fromName,
  replyTo: t.replyTo,
  type: t.type,
  tracking: t.tracking,
  projectId: t.projectId,
  createdAt: t.createdAt.toISOString(),
  updatedAt: t.updatedAt.toISOString(),
});

export async function createTemplate(em: EntityManager, projectId: string, input: CreateTemplate): Promise<Template> {
  const format = input.format ?? 'html';
  const { bodyHtml } = await checkedContent({ subject: input.subject, body: input.body, format });
  await assertVerifiedSender(em, projectId, input.from);
  const template = em.create(Template, {
    id: newId(),
    projectId,
    name: input.name,
    description: input.description ?? null,
    subject: input.subject,
    body: input.body,
    format,
    bodyHtml,
    fromEmail: input.from,
    fromName: input.fromName ?? null,
    replyTo: input.replyTo ?? null,
    type: input.type ?? 'MARKETING',
    tracking: input.tracking ?? null,
  });
  await em.persist(template).flush();
  return template;
}

export async function getTemplate(em: EntityManager, projectId: string, id: string): Promise<Template> {
  const template = await em.findOne(Template, { projectId, id });
  if (!template) throw notFound('Template');
  return template;
}

export async function updateTemplate(em: EntityManager, projectId: string, id: string, patch: UpdateTemplate): Promise<Template> {
  const template = await getTemplate(em, projectId, id);
  // A new format recompiles the stored body; a new body is compiled in the format it will have.
  const content =
    patch.body !== undefined || (patch.format !== undefined && patch.format !== template.format)
      ? await checkedContent({ body: patch.body ?? template.body, format: patch.format ?? template.format })
      : {};
  if (patch.subject !== undefined) await checkedContent({ subject: patch.subject, format: 'html' });
  if (patch.from) await assertVerifiedSender(em, projectId, patch.from);
  const { from, ...rest } = patch;
  const changes = Object.fromEntries(Object.entries({ ...rest, ...content, fromEmail: from }).filter(([, v]) => v !== undefined));
  if (Object.keys(changes).length === 0) return template;
  // Any field given counts as an update, even one set to the value it had.
  em.assign(template, { ...changes, updatedAt: new Date() });
  await em.flush();
  return template;
}

/**
 * Where a template is used: by the SEND_EMAIL steps of workflows. (Campaigns carry their own
 * content; `campaigns` stays for clients that expect it.)
 */
export async function templateUsage(em: EntityManager, projectId: string, templateId: string) {
  const campaigns: Array<{ id: string; name: string; status: string }> = [];
  const workflowSteps = await automationStepsSending(em, projectId, templateId);
  return { templateId, campaigns, workflowSteps, total: campaigns.length + workflowSteps.length };
}

export async function deleteTemplate(em: EntityManager, projectId: string, id: string): Promise<void> {
  const template = await getTemplate(em, projectId, id);
  const usage = await templateUsage(em, projectId, id);
  if (usage.total > 0) throw conflict('The template is used by campaigns or workflow steps', 'TEMPLATE_IN_USE', { details: usage });
  await em.remove(template).flush();
}

/** A copy named "<name> (copy)"; its tracking override is not copied. */
export async function duplicateTemplate(em: EntityManager, projectId: string, id: string): Promise<Template> {
  const source = await getTemplate(em, projectId, id);
  const copy = em.create(Template, {
    id: newId(),
    projectId,
    ...copiedMessage(source),
  });
  await em.persist(copy).flush();
  return copy;
}

export interface TemplateListQuery {
  page: number;
  pageSize: number;
  type?: Template['type'];
  search?: string;
  sort: 'name' | 'createdAt' | 'updatedAt';
  dir: 'ASC' | 'DESC';
}

export async function listTemplates(em: EntityManager, projectId: string, q: TemplateListQuery) {
  const pattern = q.search ? containsPattern(q.search) : undefined;
  const [rows, total] = await em.findAndCount(
    Template,
    {
      projectId,
      ...(q.type ? { type: q.type } : {}),
      ...(pattern ? { $or: [{ name: { $ilike: pattern } }, { description: { $ilike: pattern } }, { subject: { $ilike: pattern } }] } : {}),
    },
    { orderBy: [{ [q.sort]: q.dir }, { id: q.dir }], limit: q.pageSize, offset: (q.page - 1) * q.pageSize },
  );
  return { data: rows.map(toTemplateDto), total, page: q.page, pageSize: q.pageSize, totalPages: Math.ceil(total / q.pageSize) };
}
