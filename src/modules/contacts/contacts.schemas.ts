import { z } from 'zod';
import { emailSchema } from '../../http/validate';
import { dataMapSchema } from './data-map';

export const createContactSchema = z.object({
  email: emailSchema,
  subscribed: z.boolean().optional(),
  data: dataMapSchema.optional(),
});

export const SNOOZE_DURATIONS = ['2_weeks', '1_month', '6_months', '1_year'] as const;

export const patchContactSchema = z
  .object({
    email: emailSchema.optional(),
    subscribed: z.boolean().optional(),
    data: dataMapSchema.optional(),
    snoozedUntil: z.iso.datetime({ offset: true, message: 'snoozedUntil must be an ISO 8601 date-time' }).nullable().optional(),
    snooze: z.enum(SNOOZE_DURATIONS).optional(),
  })
  .superRefine((v, ctx) => {
    const snoozing = v.snooze !== undefined || (v.snoozedUntil !== undefined && v.snoozedUntil !== null);
    if (v.snooze !== undefined && v.snoozedUntil !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['snooze'], message: 'Give either snooze or snoozedUntil, not both' });
    }
    if (snoozing && v.subscribed !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['subscribed'], message: 'subscribed cannot be combined with a snooze' });
    }
    if (v.snoozedUntil && Date.parse(v.snoozedUntil) <= Date.now()) {
      ctx.addIssue({ code: 'custom', path: ['snoozedUntil'], message: 'snoozedUntil must be in the future' });
    }
  });

export const lookupSchema = z.object({
  emails: z.array(emailSchema).min(1).max(500),
});

export const bulkSchema = z.object({
  contactIds: z.array(z.uuid({ message: 'contactIds must hold contact ids (UUIDs)' })).min(1).max(1000),
});

/** End of a snooze of the given length, from now, in calendar terms for months and years. */
export function snoozeEnd(duration: (typeof SNOOZE_DURATIONS)[number], from = new Date()): Date {
  const d = new Date(from);
  if (duration === '2_weeks') d.setUTCDate(d.getUTCDate() + 14);
  if (duration === '1_month') d.setUTCMonth(d.getUTCMonth() + 1);
  if (duration === '6_months') d.setUTCMonth(d.getUTCMonth() + 6);
  if (duration === '1_year') d.setUTCFullYear(d.getUTCFullYear() + 1);
  return d;
}
