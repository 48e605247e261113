import { EntitySchema, OptionalProps } from '@mikro-orm/core';
import { cascadingReference, timestampColumn } from '../db/entity-columns';
import type { InboundReport as ParsedReport } from './bounce-report';

/**
 * A report the inbound MX took (bounce, delay, complaint, auto-reply), for one email it is about (or
 * none found): what it said, and the key that makes the same report sent again change nothing twice.
 */
export class InboundReport {
  [OptionalProps]?: 'emailId' | 'projectId' | 'envelopeFrom' | 'detail' | 'receivedAt';
  id!: string;
  reportKey!: string;
  emailId: string | null = null;
  projectId: string | null = null;
  kind!: ParsedReport['kind'];
  envelopeFrom: string | null = null;
  envelopeTo!: string;
  detail: Record<string, unknown> = {};
  receivedAt!: Date;
}

export const InboundReportSchema = new EntitySchema<InboundReport>({
  class: InboundReport,
  tableName: 'inbound_reports',
  indexes: [
    { name: 'inbound_reports_email_idx', properties: ['emailId'] },
    { name: 'inbound_reports_received_idx', properties: ['receivedAt'] },
  ],
  // A unique index, not a constraint (which `properties` would make): MikroORM writes it only as SQL.
  uniques: [
    {
      name: 'inbound_reports_key_email_idx',
      expression: 'CREATE UNIQUE INDEX inbound_reports_key_email_idx ON public.inbound_reports USING btree (report_key, email_id)',
    },
  ],
  properties: {
    id: { type: 'uuid', primary: true },
    reportKey: { type: 'text' },
    emailId: { ...cascadingReference('inbound_reports', 'email_id', 'Email'), nullable: true },
    projectId: { ...cascadingReference('inbound_reports', 'project_id', 'Project'), nullable: true },
    kind: { enum: true, items: ['bounce', 'delay', 'complaint', 'auto-reply', 'unknown'], type: 'text' },
    envelopeFrom: { type: 'text', nullable: true },
    envelopeTo: { type: 'text' },
    detail: { type: 'json', columnType: 'jsonb', defaultRaw: `'{}'::jsonb` },
    receivedAt: { ...timestampColumn },
  },
});
