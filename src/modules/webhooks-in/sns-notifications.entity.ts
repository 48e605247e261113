import { EntitySchema, OptionalProps } from '@mikro-orm/core';
import { timestampColumn } from '../../db/entity-columns';

/** An SNS notification already processed: its MessageId makes a redelivered one change nothing. */
export class SnsNotification {
  [OptionalProps]?: 'receivedAt';
  messageId!: string;
  receivedAt!: Date;
}

export const SnsNotificationSchema = new EntitySchema<SnsNotification>({
  class: SnsNotification,
  tableName: 'sns_notifications',
  properties: {
    messageId: { type: 'text', primary: true },
    receivedAt: { ...timestampColumn },
  },
});
