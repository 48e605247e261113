import { EntitySchema, OptionalProps } from '@mikro-orm/core';
import { cascadingReference, optionalTimestampColumn, timestampColumn } from '../../db/entity-columns';
import type { ConditionTree } from './conditions/tree';

/** A project's segment: a condition over contacts (dynamic) or a hand-kept list (static), with its member count. */
export class Segment {
  [OptionalProps]?: 'description' | 'condition' | 'trackMembership' | 'memberCount' | 'memberCountAt' | 'createdAt' | 'updatedAt';
  id!: string;
  projectId!: string;
  name!: string;
  description: string | null = null;
  type!: 'DYNAMIC' | 'STATIC';
  condition: ConditionTree | null = null;
  trackMembership = false;
  memberCount = 0;
  memberCountAt: Date | null = null;
  /** Both set by PostgreSQL on insert (its now(), to the microsecond, which orders lists) and read back by the INSERT. */
  createdAt!: Date;
  updatedAt!: Date;
}

/** A contact in a segment: a static member, or a current (exitedAt null) or past member of a tracked dynamic one. */
export class SegmentMembership {
  [OptionalProps]?: 'enteredAt' | 'exitedAt';
  segmentId!: string;
  contactId!: string;
  projectId!: string;
  enteredAt: Date = new Date();
  exitedAt: Date | null = null;
}

export const SegmentSchema = new EntitySchema<Segment>({
  class: Segment,
  tableName: 'segments',
  indexes: [{ name: 'segments_project_idx', properties: ['projectId', 'createdAt'] }],
  properties: {
    id: { type: 'uuid', primary: true },
    projectId: cascadingReference('segments', 'project_id', 'Project'),
    name: { type: 'text' },
    description: { type: 'text', nullable: true },
    type: { enum: true, items: ['DYNAMIC', 'STATIC'], type: 'text' },
    condition: { type: 'json', columnType: 'jsonb', nullable: true },
    trackMembership: { type: 'boolean', default: false },
    memberCount: { type: 'integer', default: 0 },
    memberCountAt: { ...optionalTimestampColumn },
    createdAt: { ...timestampColumn },
    updatedAt: { ...timestampColumn, onUpdate: () => new Date() },
  },
});

export const SegmentMembershipSchema = new EntitySchema<SegmentMembership>({
  class: SegmentMembership,
  tableName: 'segment_memberships',
  indexes: [
    { name: 'segment_memberships_contact_idx', properties: ['contactId'] },
    {
      name: 'segment_memberships_current_idx',
      expression: 'CREATE INDEX segment_memberships_current_idx ON public.segment_memberships USING btree (segment_id, contact_id) WHERE (exited_at IS NULL)',
    },
  ],
  properties: {
    segmentId: cascadingReference('segment_memberships', 'segment_id', 'Segment', { primary: true }),
    contactId: cascadingReference('segment_memberships', 'contact_id', 'Contact', { primary: true }),
    // No foreign key: the project is the segment's (and the contact's), copied for lookups by project.
    projectId: { type: 'uuid' },
    enteredAt: { ...timestampColumn },
    exitedAt: { ...optionalTimestampColumn },
  },
});
