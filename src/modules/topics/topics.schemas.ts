import { z } from 'zod';
import { pageQuery, sortQuery } from '../../http/pagination';
import { queryText } from '../../http/query';
import { dateTime, offsetList, sameShape } from '../../http/responses';
import { TOPIC_DEFAULTS } from './topics.entity';
import type { listTopics, toTopicDto } from './topics.service';

const topicFields = {
  name: z.string().trim().min(1).max(200),
  description: z.string().max(2000).nullable().optional(),
  defaultSubscription: z
    .enum(TOPIC_DEFAULTS)
    .optional()
    .meta({ description: 'opt_in: every contact receives the topic until it leaves; opt_out: only contacts that join it. Default opt_in' }),
  public: z.boolean().optional().meta({ description: 'Listed in the preference center. Default true' }),
  doubleOptIn: z
    .boolean()
    .nullable()
    .optional()
    .meta({ description: 'Joining waits for an emailed confirmation; null (the default) follows the project’s settings.doubleOptIn' }),
};

export const createTopicSchema = z.object(topicFields);
export const updateTopicSchema = z.object({ ...topicFields, name: topicFields.name.optional() });

export type CreateTopic = z.output<typeof createTopicSchema>;
export type UpdateTopic = z.output<typeof updateTopicSchema>;

export const topicListQuery = z.object({
  ...pageQuery,
  ...sortQuery({ name: 'name', createdAt: 'createdAt', updatedAt: 'updatedAt' }, 'createdAt'),
  search: queryText({ trim: true, description: 'Case-insensitive match on name or description' }),
});

export const topicResponse = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  defaultSubscription: z.enum(TOPIC_DEFAULTS),
  public: z.boolean(),
  doubleOptIn: z.boolean().nullable().meta({ description: 'null: the project’s settings.doubleOptIn' }),
  projectId: z.string(),
  createdAt: dateTime,
  updatedAt: dateTime,
});
sameShape<z.output<typeof topicResponse>, ReturnType<typeof toTopicDto>>(true);

export const topicListResponse = offsetList(topicResponse);
sameShape<z.output<typeof topicListResponse>, Awaited<ReturnType<typeof listTopics>>>(true);
