import type { EntityManager } from '@mikro-orm/postgresql';
import { z } from 'zod';
import { Project } from './accounts.entity';

/** What a project may change about how its mail is sent. */
export const projectSettingsSchema = z
  .object({
    /** Open and click tracking: on all mail, only on MARKETING mail, or off. */
    tracking: z.enum(['all', 'marketing', 'off']),
    /** Where `tracking` allows it: the open pixel, and click-tracking links (templates, campaigns and sends may override). */
    trackOpens: z.boolean(),
    trackClicks: z.boolean(),
    /** The unsubscribe footer MARKETING mail carries before `</body>`. */
    unsubscribeFooter: z.boolean(),
    /** New topic subscriptions stay pending until confirmed by email; a topic's own `doubleOptIn` overrides it. */
    doubleOptIn: z.boolean(),
    /** The template of double opt-in confirmation mail; absent or null: the built-in mail (docs/consent.md). */
    confirmationTemplateId: z.uuid({ message: 'confirmationTemplateId must be a template id (UUID)' }).nullable().optional(),
  })
  .strict();

export type ProjectSettings = z.output<typeof projectSettingsSchema>;

export const DEFAULT_PROJECT_SETTINGS: ProjectSettings = { tracking: 'all', trackOpens: true, trackClicks: true, unsubscribeFooter: true, doubleOptIn: false };

/** Open and click tracking switched on or off for a template, campaign or send; an absent switch follows the level above. */
export const trackingOverrideSchema = z
  .object({ opens: z.boolean().optional(), clicks: z.boolean().optional() })
  .strict()
  .meta({ description: 'Open pixel and click-tracking links on or off; an absent switch follows the level above (send → template or campaign → project)' });

export type TrackingOverride = z.output<typeof trackingOverrideSchema>;

// Built once: making the partial schema per call cost more than the query that read the settings.
const storedSettingsSchema = projectSettingsSchema.partial();

export function withDefaults(stored: unknown): ProjectSettings {
  const parsed = storedSettingsSchema.safeParse(stored ?? {});
  return { ...DEFAULT_PROJECT_SETTINGS, ...(parsed.success ? parsed.data : {}) };
}

export async function projectSettings(em: EntityManager, projectId: string): Promise<ProjectSettings> {
  const project = await em.findOne(Project, { id: projectId });
  return withDefaults(project?.settings);
}
