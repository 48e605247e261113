import { EntitySchema, OptionalProps } from '@mikro-orm/core';
import { cascadingReference, optionalTimestampColumn, timestampColumn } from '../../db/entity-columns';
import type { TrackingOverride } from '../accounts';
import type { ConditionTree } from '../segments';
import { messageProperties } from '../templates';
import type { AbPhase, AbTest, CampaignStatus, LocalTime } from './campaigns.schemas';

/** A campaign: one message sent to an audience (all contacts, a segment or a condition), with its delivery counts. */
export class Campaign {
  [OptionalProps]?:
    | 'description'
    | 'fromName'
    | 'replyTo'
    | 'type'
    | 'tracking'
    | 'status'
    | 'segmentId'
    | 'audienceCondition'
    | 'topicId'
    | 'scheduledFor'
    | 'totalRecipients'
    | 'sentCount'
    | 'deliveredCount'
    | 'openedCount'
    | 'clickedCount'
    | 'bouncedCount'
    | 'complainedCount'
    | 'failedCount'
    | 'audienceFixedAt'
    | 'sentAt'
    | 'abTest'
    | 'abWinnerVariantId'
    | 'abPhase'
    | 'localTime'
    | 'createdAt'
    | 'updatedAt';
  id!: string;
  projectId!: string;
  name!: string;
  description: string | null = null;
  subject!: string;
  body!: string;
  fromEmail!: string;
  fromName: string | null = null;
  replyTo: string | null = null;
  type: 'TRANSACTIONAL' | 'MARKETING' | 'HEADLESS' = 'MARKETING';
  /** Open and click tracking switched on or off for this campaign's mail; null follows the project. */
  tracking: TrackingOverride | null = null;
  status: CampaignStatus = 'DRAFT';
  audienceType!: 'ALL' | 'SEGMENT' | 'FILTERED';
  segmentId: string | null = null;
  audienceCondition: ConditionTree | null = null;
  /** Only contacts that receive this topic get the campaign, and its unsubscribe link leaves the topic. */
  topicId: string | null = null;
  scheduledFor: Date | null = null;
  totalRecipients = 0;
  sentCount = 0;
  deliveredCount = 0;
  openedCount = 0;
  clickedCount = 0;
  bouncedCount = 0;
  complainedCount = 0;
  failedCount = 0;
  /** When sending started and the audience was fixed (its recipients' emails queued). */
  audienceFixedAt: Date | null = null;
  sentAt: Date | null = null;
  /** Variants sent to a sample of the audience first; the winner goes to the rest. */
  abTest: AbTest | null = null;
  abWinnerVariantId: string | null = null;
  /** Where an A/B test is: sending its sample, waiting for the winner, sending the winner, done. */
  abPhase: AbPhase | null = null;
  /** Each recipient gets the campaign at an hour of a day in their own time zone. */
  localTime: LocalTime | null = null;
  /** Both set by PostgreSQL on insert (its now(), to the microsecond, which orders lists) and read back by the INSERT. */
  createdAt!: Date;
  updatedAt!: Date;
}

const countColumn = { type: 'integer', default: 0 } as const;

export const CampaignSchema = new EntitySchema<Campaign>({
  class: Campaign,
  tableName: 'campaigns',
  indexes: [
    { name: 'campaigns_project_created_idx', properties: ['projectId', 'createdAt'] },
    {
      name: 'campaigns_segment_idx',
      expression: 'CREATE INDEX campaigns_segment_idx ON public.campaigns USING btree (segment_id) WHERE (segment_id IS NOT NULL)',
    },
    {
      name: 'campaigns_project_scheduled_idx',
      expression: `CREATE INDEX campaigns_project_scheduled_idx ON public.campaigns USING btree (project_id, scheduled_for) WHERE (status = 'SCHEDULED'::text)`,
    },
  ],
  properties: {
    id: { type: 'uuid', primary: true },
    projectId: cascadingReference('campaigns', 'project_id', 'Project'),
    ...messageProperties,
    status: { enum: true, items: ['DRAFT', 'SCHEDULED', 'SENDING', 'TESTING', 'SENT', 'CANCELLED'], type: 'text', default: 'DRAFT' },
    audienceType: { enum: true, items: ['ALL', 'SEGMENT', 'FILTERED'], type: 'text' },
    // An active campaign's segment cannot be deleted (SEGMENT_IN_USE); a finished campaign forgets its deleted segment.
    segmentId: {
      kind: 'm:1',
      entity: 'Segment',
      mapToPk: true,
      fieldName: 'segment_id',
      nullable: true,
      foreignKeyName: 'campaigns_segment_id_fkey',
      deleteRule: 'set null',
      updateRule: 'no action',
    },
    audienceCondition: { type: 'json', columnType: 'jsonb', nullable: true },
    // A topic in use by an unsent campaign cannot be deleted; a sent one forgets it.
    topicId: {
      kind: 'm:1',
      entity: 'Topic',
      mapToPk: true,
      fieldName: 'topic_id',
      nullable: true,
      foreignKeyName: 'campaigns_topic_id_fkey',
      deleteRule: 'set null',
      updateRule: 'no action',
    },
    scheduledFor: { ...optionalTimestampColumn },
    totalRecipients: { ...countColumn },
    sentCount: { ...countColumn },
    deliveredCount: { ...countColumn },
    openedCount: { ...countColumn },
    clickedCount: { ...countColumn },
    bouncedCount: { ...countColumn },
    complainedCount: { ...countColumn },
    failedCount: { ...countColumn },
    audienceFixedAt: { ...optionalTimestampColumn },
    sentAt: { ...optionalTimestampColumn },
    abTest: { type: 'json', columnType: 'jsonb', nullable: true },
    abWinnerVariantId: { type: 'text', nullable: true },
    abPhase: { type: 'text', nullable: true },
    localTime: { type: 'json', columnType: 'jsonb', nullable: true },
    createdAt: { ...timestampColumn },
    updatedAt: { ...timestampColumn, onUpdate: () => new Date() },
  },
});
