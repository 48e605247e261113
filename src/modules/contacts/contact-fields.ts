import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/orm';
import { badRequest, notFound } from '../../http/errors';

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
  const [{ total }] = await sql<{ total: number }>(em, `SELECT count(*)::int AS total FROM contacts WHERE project_id = ?`, [projectId]);
  const rows = await sql<{ name: string; type: string; n: number }>(
    em,
    `SELECT e.key AS name, jsonb_typeof(e.value) AS type, count(*)::int AS n
     FROM contacts c, jsonb_each(c.data) AS e WHERE c.project_id = ? AND jsonb_typeof(e.value) <> 'null'
     GROUP BY 1, 2`,
    [projectId],
  );
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
  const rows = await sql<{ value: unknown; count: number }>(
    em,
    `SELECT data -> ? AS value, count(*)::int AS count FROM contacts
     WHERE project_id = ? AND jsonb_exists(data, ?) AND jsonb_typeof(data -> ?) <> 'null'
     GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT ?`,
    [field, projectId, field, field, limit],
  );
  if (rows.length === 0) throw notFound('Field');
  return { field, data: rows };
}

/** Segments, campaigns and workflows whose conditions, content or steps name the field. */
export async function fieldUsage(em: EntityManager, projectId: string, field: string) {
  customOnly(field);
  const path = `data.${field}`;
  // As a filter's field at any depth of a condition tree: exactly "data.<field>", or a nested path under it.
  // (A filter value that merely reads "data.<field>" is no reference.)
  const inCondition = (column: string) =>
    `jsonb_path_exists(${column}, '$.**.filters[*].field \\? (@ == $f || @ starts with $p)', jsonb_build_object('f', ?::text, 'p', ?::text))`;
  const segments = await sql<{ id: string; name: string }>(
    em,
    `SELECT id, name FROM segments WHERE project_id = ? AND ${inCondition('condition')} ORDER BY name`,
    [projectId, path, `${path}.`],
  );
  // In a campaign: its audience filter, or a {{field}} / {{data.field}} variable in its subject or body.
  const variable = new RegExp(`{{\\s*(data\\.)?${field.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\s*(\\?\\?[^}]*)?}}`);
  const campaigns = (
    await sql<{ id: string; name: string; subject: string; body: string; in_filter: boolean }>(
      em,
      `SELECT id, name, subject, body, coalesce(${inCondition('audience_condition')}, false) AS in_filter FROM campaigns WHERE project_id = ? ORDER BY name`,
      [path, `${path}.`, projectId],
    )
  )
    .filter((c) => c.in_filter || variable.test(c.subject) || variable.test(c.body))
    .map((c) => ({ id: c.id, name: c.name }));
  const workflows = await sql<{ id: string; name: string; usedAs: string }>(
    em,
    `SELECT DISTINCT w.id, w.name, lower(s.type) AS "usedAs" FROM workflows w JOIN workflow_steps s ON s.workflow_id = w.id
     WHERE w.project_id = ? AND ((s.type = 'CONDITION' AND (s.config->>'field' = ? OR starts_with(s.config->>'field', ?)))
       OR (s.type = 'UPDATE_CONTACT' AND jsonb_exists(coalesce(s.config->'updates', '{}'::jsonb), ?)))
     ORDER BY 2, 3`,
    [projectId, path, `${path}.`, field],
  );
  return { field, segments, campaigns, workflows, total: segments.length + campaigns.length + workflows.length };
}

/** Removes the field from every contact of the project; answers the contacts that had it. */
export async function deleteField(em: EntityManager, projectId: string, field: string): Promise<{ field: string; deleted: true; contacts: string[] }> {
  customOnly(field);
  const rows = await sql<{ id: string }>(
    em,
    `UPDATE contacts SET data = data - ?::text, updated_at = now() WHERE project_id = ? AND jsonb_exists(data, ?) RETURNING id`,
    [field, projectId, field],
  );
  if (rows.length === 0) throw notFound('Field');
  return { field, deleted: true, contacts: rows.map((r) => r.id) };
}
