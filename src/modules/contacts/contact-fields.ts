import type { EntityManager } from '@mikro-orm/postgresql';
import { badRequest, notFound } from '../../errors';
import { Contact } from './contacts.entity';
import { dataKeyTypes, fieldReferences, fieldValueCounts, removeDataKey } from './contacts.queries';

const STANDARD = [
  { name: 'email', type: 'string' },
  { name: 'subscribed', type: 'boolean' },
  { name: 'createdAt', type: 'date' },
  { name: 'updatedAt', type: 'date' },
] as const;

const isStandard = (field: string) => STANDARD.some((s) => s.name === field);

function customOnly(field: string): void {
  if (isStandard(field)) throw badRequest(`"${field}" is a standard field; this applies to custom (data) fields only`, 'INVALID_FIELD');
}

const percent = (n: number, of: number) => (of === 0 ? 0 : Math.round((1000 * n) / of) / 10);

/**
 * Standard fields, then every top-level data key with the JSON type most of its values have
 * (`types` counts each when they differ) and the share of the project's contacts that have it.
 */
export async function listFields(em: EntityManager, projectId: string) {
  const total = await em.count(Contact, { projectId });
  const rows = await dataKeyTypes(em, projectId);
  const custom = new Map<string, Record<string, number>>();
  for (const r of rows) custom.set(r.name, { ...custom.get(r.name), [r.type]: r.n });
  const data = [
    ...STANDARD.map((s) => ({ name: s.name, type: s.type, standard: true, count: total, coverage: total ? 100 : 0 })),
    ...[...custom]
      .map(([name, types]) => {
        const count = Object.values(types).reduce((a, b) => a + b, 0);
        const [type] = Object.entries(types).sort((a, b) => b[1] - a[1])[0];
        return { name, type, standard: false, count, coverage: percent(count, total), ...(Object.keys(types).length > 1 ? { types } : {}) };
      })
      .sort((a, b) => b.count - a.count || a.name.localeCompare(b.name)),
  ];
  return { data, totalContacts: total };
}

/** The most common values of a data field, with how many contacts have each. */
export async function fieldValues(em: EntityManager, projectId: string, field: string, limit: number) {
  customOnly(field);
  const rows = await fieldValueCounts(em, projectId, field, limit);
  if (rows.length === 0) throw notFound('Field');
  return { field, data: rows };
}

/** Segments, campaigns and workflows whose conditions, content or steps name the field. */
export async function fieldUsage(em: EntityManager, projectId: string, field: string) {
  customOnly(field);
  const { segments, campaigns: candidates, workflows } = await fieldReferences(em, projectId, field);
  // In a campaign: its audience filter, or a {{field}} / {{data.field}} variable in its subject or body.
  const variable = new RegExp(`{{\\s*(data\\.)?${field.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\s*(\\?\\?[^}]*)?}}`);
  const campaigns = candidates.filter((c) => c.in_filter || variable.test(c.subject) || variable.test(c.body)).map((c) => ({ id: c.id, name: c.name }));
  return { field, segments, campaigns, workflows, total: segments.length + campaigns.length + workflows.length };
}

/** Removes the field from every contact of the project; answers the contacts that had it. */
export async function deleteField(em: EntityManager, projectId: string, field: string): Promise<{ field: string; deleted: true; contacts: string[] }> {
  customOnly(field);
  const contacts = await removeDataKey(em, projectId, field);
  if (contacts.length === 0) throw notFound('Field');
  return { field, deleted: true, contacts };
}
