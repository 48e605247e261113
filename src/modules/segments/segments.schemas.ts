import { z } from 'zod';
import { dateTime, sameShape } from '../../http/responses';
import { emailSchema } from '../../validation';
import { type ConditionTree, OPERATORS, UNITS } from './conditions/tree';
import type { addStaticMembers, removeStaticMembers, toSegmentDto } from './segments.service';

/**
 * The condition tree as the document shows it. Requests keep it `unknown` at the edge: the service
 * checks it against the project's fields and answers the spec's simple 400.
 */
const conditionTreeJson = {
  type: 'object',
  description: 'Groups of filters joined by `logic`; a group may nest a tree of the same shape in `conditions`.',
  properties: {
    logic: { type: 'string', enum: ['AND', 'OR'] },
    groups: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          filters: {
            type: 'array',
            items: {
              type: 'object',
              properties: {
                field: {
                  type: 'string',
                  description:
                    'email, subscribed, createdAt, updatedAt, data.<path>, event.<name>, ' +
                    'email.<activity>, segment.<id> or topic.<id> (subscribed / notSubscribed)',
                },
                operator: { type: 'string', enum: [...OPERATORS] },
                value: { description: 'Any JSON value the operator compares with' },
                unit: { type: 'string', enum: Object.keys(UNITS), description: 'For time windows' },
              },
              required: ['field', 'operator'],
            },
          },
          conditions: { type: 'object', description: 'A nested condition tree' },
        },
        required: ['filters'],
      },
    },
  },
  required: ['logic', 'groups'],
};
/** A condition tree in a request (checked by the service). */
export const conditionInput = z.unknown().meta(conditionTreeJson);
/** A condition tree in a response. */
export const conditionTree = z.custom<ConditionTree>().meta(conditionTreeJson);

export const createSegmentSchema = z.object({
  name: z.string().trim().min(1).max(100),
  description: z.string().max(500).nullable().optional(),
  type: z.enum(['DYNAMIC', 'STATIC']).default('DYNAMIC'),
  condition: conditionInput.optional().meta({ description: 'Required for DYNAMIC, ignored for STATIC' }),
  trackMembership: z.boolean().default(false),
});

export const updateSegmentSchema = z.object({
  name: z.string().trim().min(1).max(100).optional(),
  description: z.string().max(500).nullable().optional(),
  condition: conditionInput.optional().meta({ description: 'DYNAMIC segments only' }),
  trackMembership: z.boolean().optional(),
});

export const addMembersSchema = z.object({
  emails: z.array(emailSchema).min(1).max(500),
  createMissing: z.boolean().default(false),
  subscribed: z.boolean().optional(),
});

export const removeMembersSchema = z.object({
  emails: z.array(emailSchema).min(1).max(500),
});

export const segmentResponse = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  type: z.enum(['DYNAMIC', 'STATIC']),
  condition: conditionTree.nullable().meta({ description: 'null for STATIC segments' }),
  trackMembership: z.boolean().meta({ description: 'Entry and exit events are emitted as contacts join or leave' }),
  memberCount: z.number().int().meta({ description: 'Cached; refreshed in the background' }),
  memberCountUpdatedAt: dateTime.nullable(),
  projectId: z.string(),
  createdAt: dateTime,
  updatedAt: dateTime,
});
sameShape<z.output<typeof segmentResponse>, ReturnType<typeof toSegmentDto>>(true);

export const computedSegmentResponse = segmentResponse.extend({
  computed: z.object({ tracked: z.boolean(), entered: z.number().int(), exited: z.number().int() }),
});

export const membersAddedResponse = z.object({
  added: z.number().int(),
  alreadyMembers: z.number().int(),
  created: z.number().int().meta({ description: 'Contacts created for emails that had none (createMissing)' }),
  notFound: z.array(z.string()),
});
export const membersRemovedResponse = z.object({ removed: z.number().int(), notMembers: z.array(z.string()) });
sameShape<z.output<typeof membersAddedResponse>, Awaited<ReturnType<typeof addStaticMembers>>['result']>(true);
sameShape<z.output<typeof membersRemovedResponse>, Awaited<ReturnType<typeof removeStaticMembers>>['result']>(true);
