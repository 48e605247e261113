import { EntitySchema, OptionalProps } from '@mikro-orm/core';
import { cascadingReference, optionalTimestampColumn, timestampColumn } from '../../db/entity-columns';
import type { RecordStatuses } from './domain-records';

/** A sender domain of a project: its DKIM key pair, SPF value and what the last check found of each record. */
export class Domain {
  [OptionalProps]?: 'status' | 'recordStatus' | 'verifiedAt' | 'lastCheckedAt' | 'createdAt' | 'updatedAt';
  id!: string;
  projectId!: string;
  domain!: string;
  status: 'pending' | 'verified' = 'pending';
  verificationToken!: string;
  dkimSelector!: string;
  dkimPrivateKey!: string;
  dkimPublicKey!: string;
  spfValue!: string;
  recordStatus: RecordStatuses = {};
  verifiedAt: Date | null = null;
  lastCheckedAt: Date | null = null;
  createdAt!: Date;
  updatedAt!: Date;
}

export const DomainSchema = new EntitySchema<Domain>({
  class: Domain,
  tableName: 'domains',
  uniques: [{ name: 'domains_project_domain_key', properties: ['projectId', 'domain'] }],
  properties: {
    id: { type: 'uuid', primary: true },
    projectId: cascadingReference('domains', 'project_id', 'Project'),
    domain: { type: 'text' },
    status: { enum: true, items: ['pending', 'verified'], type: 'text', default: 'pending' },
    verificationToken: { type: 'text' },
    dkimSelector: { type: 'text' },
    dkimPrivateKey: { type: 'text' },
    dkimPublicKey: { type: 'text' },
    spfValue: { type: 'text' },
    recordStatus: { type: 'json', columnType: 'jsonb', defaultRaw: `'{}'::jsonb` },
    verifiedAt: { ...optionalTimestampColumn },
    lastCheckedAt: { ...optionalTimestampColumn },
    createdAt: { ...timestampColumn },
    updatedAt: { ...timestampColumn, onUpdate: () => new Date() },
  },
});
