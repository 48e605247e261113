import { EntitySchema, OptionalProps } from '@mikro-orm/core';
import { cascadingReference, timestampColumn } from '../../db/entity-columns';

export type TemplateType = 'TRANSACTIONAL' | 'MARKETING' | 'HEADLESS';

/** A stored template: subject and body with placeholders, its sender and type. */
export class Template {
  [OptionalProps]?: 'description' | 'fromName' | 'replyTo' | 'type' | 'tracking' | 'format' | 'bodyHtml' | 'createdAt' | 'updatedAt';
  id!: string;
  projectId!: string;
  name!: string;
  description: string | null = null;
  subject!: string;
  /** As written: HTML, or an MJML source when `format` is mjml. */
  body!: string;
  format: 'html' | 'mjml' = 'html';
  /** The HTML an MJML body compiled to when it was written; null for an HTML body. */
  bodyHtml: string | null = null;
  fromEmail!: string;
  fromName: string | null = null;
  replyTo: string | null = null;
  type: TemplateType = 'MARKETING';
  /** Open and click tracking switched on or off for mail of this template; null follows the project. */
  tracking: { opens?: boolean; clicks?: boolean } | null = null;
  createdAt!: Date;
  updatedAt!: Date;
}

/** The columns of a message a template and a campaign both have, as both tables' migrations made them. */
export const messageProperties = {
  name: { type: 'text' },
  description: { type: 'text', nullable: true },
  subject: { type: 'text' },
  body: { type: 'text' },
  fromEmail: { type: 'text' },
  fromName: { type: 'text', nullable: true },
  replyTo: { type: 'text', nullable: true },
  type: { enum: true, items: ['TRANSACTIONAL', 'MARKETING', 'HEADLESS'], type: 'text', default: 'MARKETING' },
  tracking: { type: 'json', columnType: 'jsonb', nullable: true },
  format: { enum: true, items: ['html', 'mjml'], type: 'text', default: 'html' },
  bodyHtml: { type: 'text', nullable: true },
} as const;

/** The message fields a duplicate of a template or a campaign takes over, named "<name> (copy)". */
export const copiedMessage = (
  m: Pick<Template, 'name' | 'description' | 'subject' | 'body' | 'format' | 'bodyHtml' | 'fromEmail' | 'fromName' | 'replyTo' | 'type'>,
) => ({
  name: `${m.name} (copy)`,
  description: m.description,
  subject: m.subject,
  body: m.body,
  format: m.format,
  bodyHtml: m.bodyHtml,
  fromEmail: m.fromEmail,
  fromName: m.fromName,
  replyTo: m.replyTo,
  type: m.type,
});

export const TemplateSchema = new EntitySchema<Template>({
  class: Template,
  tableName: 'templates',
  indexes: [
    { name: 'templates_project_created_idx', properties: ['projectId', 'createdAt'] },
    {
      name: 'templates_project_from_domain_idx',
      expression: `CREATE INDEX templates_project_from_domain_idx ON public.templates USING btree (project_id, split_part(from_email, '@'::text, 2))`,
    },
  ],
  properties: {
    id: { type: 'uuid', primary: true },
    projectId: cascadingReference('templates', 'project_id', 'Project'),
    ...messageProperties,
    createdAt: { ...timestampColumn },
    updatedAt: { ...timestampColumn, onUpdate: () => new Date() },
  },
});
