import pino from 'pino';
import { newId } from '../../src/db/ids';
import { createOrm, type Orm, sql } from '../../src/db/orm';
import { entities } from '../../src/modules/entities';
import { compileCondition, type SegmentRef } from '../../src/modules/segments/conditions/compile';
import { evaluateCondition } from '../../src/modules/segments/conditions/evaluate';
import { loadContactFacts } from '../../src/modules/segments/conditions/facts';
import { type ConditionTree, ConditionError, eventNamesOf, type Filter, topicIdsOf, validateTree } from '../../src/modules/segments/conditions/tree';
import { createTestDatabase } from '../setup/db';

let orm: Orm;
const projectId = newId();
const NOW = Date.parse('2026-06-15T12:00:00.000Z');
const DAY = 86_400_000;
const dynamicSegment = newId();
const staticSegment = newId();
const optInTopic = newId();
const optOutTopic = newId();
const contactIds: string[] = [];

const iso = (ms: number) => new Date(ms).toISOString();

beforeAll(async () => {
  const url = await createTestDatabase();
  orm = await createOrm(url, { entities, poolMax: 4, log: pino({ level: 'silent' }) });
  const em = orm.em.fork();
  await sql(em, `INSERT INTO projects (id, name, public_key, secret_key) VALUES (?, 'p', ?, ?)`, [projectId, `pk_${projectId}`, `sk_${projectId}`]);
  const datas: Array<Record<string, unknown>> = [
    { plan: 'pro', age: 31, tags: ['vip', 'beta'], address: { city: 'Oslo' }, signup: '2026-06-10', score: 9.5 },
    { plan: 'free', age: 17, tags: ['beta'], address: { city: 'Bergen' }, signup: '2026-06-14T23:59:59.999+02:00' },
    { plan: 'PRO', age: '31', tags: [], signup: '2026-02-30', flag: true },
    { plan: null, age: 44.25, tags: ['vip'], signup: 'not a date', flag: false },
    { age: 0, nested: { a: { b: 'deep' } }, signup: '2026-06-15 11:30', list: [{ k: 1 }, { k: 2 }] },
    { plan: 'enterprise plan', age: -3, tags: 'vip,beta', signup: '2026-06-15T12:00:00Z', weird: "it's \\ a -- test" },
    { plan: 'pro', age: 31.0, address: { city: 'oslo' }, signup: '2025-12-31', "k'ey": 'quoted', 'a.b': 'dotted' },
    {},
    { plan: ['pro'], age: true, signup: '0000-01-01', score: 10 },
    { plan: 'free', signup: '2026-06-15T12:00:00.0005Z', created: '2026-06-15T11:00:00+0100' },
  ];
  const emails = [
    'alpha@example.com',
    'beta@example.org',
    'gamma@test.io',
    'delta@example.com',
    'epsilon@x.dev',
    'zeta@example.com',
    'eta@shop.example',
    'theta@example.net',
    'iota@example.com',
    'kappa_x%@example.com',
  ];
  for (let i = 0; i < emails.length; i++) {
    const id = newId();
    contactIds.push(id);
    // Microseconds in the database, milliseconds in memory: the compilers must still agree.
    const created = new Date(NOW - i * 3 * DAY - 500).toISOString().replace('Z', '123Z');
    await sql(
      em,
      `INSERT INTO contacts (id, project_id, email, subscribed, data, created_at, updated_at) VALUES (?, ?, ?, ?, ?::jsonb, ?::timestamptz, ?::timestamptz)`,
      [id, projectId, emails[i], i % 3 !== 0, JSON.stringify(datas[i]), created, iso(NOW - i * DAY)],
    );
  }
  const event = (contact: number, name: string, at: number) =>
    sql(em, `INSERT INTO events (id, project_id, contact_id, name, data, created_at) VALUES (?, ?, ?, ?, '{}', ?::timestamptz)`, [
      newId(),
      projectId,
      contactIds[contact],
      name,
      iso(at),
    ]);
  await event(0, 'signup', NOW - 40 * DAY);
  await event(0, 'purchase', NOW - 2 * 3600_000);
  await event(1, 'signup', NOW - 1 * DAY);
  await event(2, 'purchase', NOW - 10 * DAY);
  await event(2, 'purchase', NOW - 20 * DAY);
  await event(3, 'email.open', NOW - 5 * 60_000);
  await event(4, 'email.click', NOW - 3 * DAY);
  await event(5, 'signup', NOW - 7 * DAY);
  await event(6, "it's -- odd", NOW - DAY);
  await event(7, 'email.sent', NOW - 30 * DAY);
  await sql(
    em,
    `INSERT INTO segments (id, project_id, name, type, condition) VALUES (?, ?, 'Pros', 'DYNAMIC', ?::jsonb), (?, ?, 'Hand picked', 'STATIC', NULL)`,
    [
      dynamicSegment,
      projectId,
      JSON.stringify({ logic: 'AND', groups: [{ filters: [{ field: 'data.plan', operator: 'equals', value: 'pro' }] }] }),
      staticSegment,
      projectId,
    ],
  );
  await sql(em, `INSERT INTO topics (id, project_id, name, default_subscription) VALUES (?, ?, 'News', 'opt_in'), (?, ?, 'Offers', 'opt_out')`, [
    optInTopic,
    projectId,
    optOutTopic,
    projectId,
  ]);
  // Each state in each topic, and contacts with no row (the topic's default).
  const topicRows: Array<[number, string, string]> = [
    [0, optInTopic, 'unsubscribed'],
    [1, optInTopic, 'pending'],
    [2, optInTopic, 'subscribed'],
    [0, optOutTopic, 'subscribed'],
    [3, optOutTopic, 'pending'],
    [4, optOutTopic, 'unsubscribed'],
    [5, optOutTopic, 'subscribed'],
  ];
  for (const [i, topicId, state] of topicRows) {
    await sql(em, `INSERT INTO contact_topics (contact_id, topic_id, project_id, state) VALUES (?, ?, ?, ?)`, [contactIds[i], topicId, projectId, state]);
  }
  for (const i of [1, 3, 5]) {
    await sql(em, `INSERT INTO segment_memberships (segment_id, contact_id, project_id, exited_at) VALUES (?, ?, ?, ?)`, [
      staticSegment,
      contactIds[i],
      projectId,
      i === 5 ? iso(NOW) : null,
    ]);
  }
});
afterAll(() => orm.close());

const segments = (): Map<string, SegmentRef> =>
  new Map([
    [
      dynamicSegment,
      { id: dynamicSegment, type: 'DYNAMIC', condition: { logic: 'AND', groups: [{ filters: [{ field: 'data.plan', operator: 'equals', value: 'pro' }] }] } },
    ],
    [staticSegment, { id: staticSegment, type: 'STATIC', condition: null }],
  ]);

const one = (f: Filter): ConditionTree => ({ logic: 'AND', groups: [{ filters: [f] }] });

async function viaSql(tree: ConditionTree): Promise<string[]> {
  const params: unknown[] = [projectId];
  const where = compileCondition(tree, { now: NOW, segments: segments() }, params);
  const rows = await sql<{ id: string }>(orm.em.fork(), `SELECT c.id FROM contacts c WHERE c.project_id = ? AND ${where} ORDER BY c.id`, params);
  return rows.map((r) => r.id);
}

async function viaMemory(tree: ConditionTree): Promise<string[]> {
  const names = new Set([...eventNamesOf(tree, NOW), ...eventNamesOf(segments().get(dynamicSegment)!.condition!, NOW)]);
  const facts = await loadContactFacts(orm.em.fork(), projectId, contactIds, names, topicIdsOf(tree, NOW));
  return [...facts.entries()]
    .filter(([, f]) => evaluateCondition(tree, f, { now: NOW, segments: segments() }))
    .map(([id]) => id)
    .sort();
}

const filters: Filter[] = [
  { field: 'email', operator: 'equals', value: 'Alpha@Example.com' },
  { field: 'email', operator: 'notEquals', value: 'alpha@example.com' },
  { field: 'email', operator: 'contains', value: 'EXAMPLE.COM' },
  { field: 'email', operator: 'notContains', value: '.com' },
  { field: 'email', operator: 'contains', value: '_x%' },
  { field: 'subscribed', operator: 'equals', value: true },
  { field: 'subscribed', operator: 'notEquals', value: 'true' },
  { field: 'createdAt', operator: 'within', value: 7, unit: 'days' },
  { field: 'createdAt', operator: 'olderThan', value: 10, unit: 'days' },
  { field: 'createdAt', operator: 'equals', value: '2026-06-12' },
  { field: 'createdAt', operator: 'notEquals', value: '2026-06-12' },
  { field: 'createdAt', operator: 'greaterThan', value: '2026-06-09' },
  { field: 'createdAt', operator: 'lessThanOrEqual', value: '2026-06-09' },
  { field: 'createdAt', operator: 'greaterThanOrEqual', value: iso(NOW - 3 * DAY - 500) },
  { field: 'createdAt', operator: 'lessThan', value: iso(NOW - 3 * DAY - 500) },
  { field: 'createdAt', operator: 'equals', value: iso(NOW - 3 * DAY - 500) },
  { field: 'createdAt', operator: 'greaterThan', value: iso(NOW - 3 * DAY - 500) },
  { field: 'updatedAt', operator: 'within', value: 36, unit: 'hours' },
  { field: 'updatedAt', operator: 'olderThan', value: 90, unit: 'minutes' },
  { field: 'data.plan', operator: 'equals', value: 'pro' },
  { field: 'data.plan', operator: 'notEquals', value: 'pro' },
  { field: 'data.plan', operator: 'contains', value: 'PRO' },
  { field: 'data.plan', operator: 'notContains', value: 'pro' },
  { field: 'data.plan', operator: 'exists' },
  { field: 'data.plan', operator: 'notExists' },
  { field: 'data.plan', operator: 'equals', value: ['pro'] },
  { field: 'data.tags', operator: 'contains', value: 'vip' },
  { field: 'data.tags', operator: 'notContains', value: 'vip' },
  { field: 'data.tags', operator: 'equals', value: ['vip', 'beta'] },
  { field: 'data.age', operator: 'greaterThan', value: 30 },
  { field: 'data.age', operator: 'greaterThanOrEqual', value: '31' },
  { field: 'data.age', operator: 'lessThan', value: 0.5 },
  { field: 'data.age', operator: 'lessThanOrEqual', value: 31 },
  { field: 'data.age', operator: 'equals', value: 31 },
  { field: 'data.score', operator: 'greaterThan', value: 9.5 },
  { field: 'data.flag', operator: 'equals', value: false },
  { field: 'data.address.city', operator: 'equals', value: 'Oslo' },
  { field: 'data.address.city', operator: 'contains', value: 'OSL' },
  { field: 'data.nested.a.b', operator: 'exists' },
  { field: 'data.list', operator: 'contains', value: { k: 2 } },
  { field: 'data.signup', operator: 'within', value: 2, unit: 'days' },
  { field: 'data.signup', operator: 'olderThan', value: 1, unit: 'days' },
  { field: 'data.signup', operator: 'greaterThan', value: '2026-06-14' },
  { field: 'data.signup', operator: 'lessThan', value: '2026-06-15T10:00:00Z' },
  { field: 'data.created', operator: 'greaterThanOrEqual', value: '2026-06-15T10:00:00Z' },
  { field: "data.k'ey", operator: 'equals', value: 'quoted' },
  { field: 'data.weird', operator: 'contains', value: '\\ a --' },
  { field: 'data.missing', operator: 'notEquals', value: 'x' },
  { field: 'event.signup', operator: 'triggered' },
  { field: 'event.signup', operator: 'notTriggered' },
  { field: 'event.signup', operator: 'triggeredWithin', value: 7, unit: 'days' },
  { field: 'event.signup', operator: 'triggeredOlderThan', value: 7, unit: 'days' },
  { field: 'event.signup', operator: 'notTriggeredWithin', value: 7, unit: 'days' },
  { field: 'event.purchase', operator: 'triggeredWithin', value: 3, unit: 'hours' },
  { field: "event.it's -- odd", operator: 'triggered' },
  { field: 'email.opened', operator: 'triggeredWithin', value: 10, unit: 'minutes' },
  { field: 'email.click', operator: 'triggered' },
  { field: 'email.sent', operator: 'notTriggeredWithin', value: 1, unit: 'days' },
  { field: `segment.${dynamicSegment}`, operator: 'memberOfSegment' },
  { field: `segment.${staticSegment}`, operator: 'memberOfSegment' },
  { field: `segment.${staticSegment}`, operator: 'notMemberOfSegment' },
  { field: `topic.${optInTopic}`, operator: 'subscribed' },
  { field: `topic.${optInTopic}`, operator: 'notSubscribed' },
  { field: `topic.${optOutTopic}`, operator: 'subscribed' },
  { field: `topic.${optOutTopic}`, operator: 'notSubscribed' },
];

test.each(filters.map((f) => [`${f.field} ${f.operator} ${JSON.stringify(f.value ?? '')}${f.unit ? ' ' + f.unit : ''}`, f] as const))(
  'SQL and the evaluator agree: %s',
  async (_name, f) => {
    const tree = one(f);
    expect(await viaMemory(tree)).toEqual(await viaSql(tree));
  },
);

test('the fixtures make the comparisons meaningful: most filters match some contacts but not all', async () => {
  let partial = 0;
  for (const f of filters) {
    const n = (await viaSql(one(f))).length;
    if (n > 0 && n < contactIds.length) partial++;
  }
  expect(partial).toBeGreaterThanOrEqual(filters.length - 6);
});

test('nested groups with AND and OR agree too', async () => {
  const trees: ConditionTree[] = [
    {
      logic: 'OR',
      groups: [
        { filters: [filters[19], filters[5]] },
        { filters: [filters[48]], conditions: { logic: 'AND', groups: [{ filters: [filters[29]] }, { filters: [filters[7]] }] } },
      ],
    },
    {
      logic: 'AND',
      groups: [{ filters: [], conditions: { logic: 'OR', groups: [{ filters: [filters[2]] }, { filters: [filters[59]] }] } }, { filters: [filters[24]] }],
    },
  ];
  for (const t of trees) expect(await viaMemory(t)).toEqual(await viaSql(t));
});

test('topic filters: the contact’s row decides, else the default; pending is not subscribed; an unknown topic is nobody’s', async () => {
  const ids = (...i: number[]) => i.map((n) => contactIds[n]).sort();
  expect(await viaSql(one({ field: `topic.${optInTopic}`, operator: 'subscribed' }))).toEqual(ids(2, 3, 4, 5, 6, 7, 8, 9));
  expect(await viaSql(one({ field: `topic.${optOutTopic}`, operator: 'subscribed' }))).toEqual(ids(0, 5));
  const unknown = `topic.${newId()}`;
  for (const tree of [one({ field: unknown, operator: 'subscribed' }), one({ field: unknown, operator: 'notSubscribed' })]) {
    expect(await viaMemory(tree)).toEqual(await viaSql(tree));
  }
  expect(await viaSql(one({ field: unknown, operator: 'notSubscribed' }))).toEqual(ids(0, 1, 2, 3, 4, 5, 6, 7, 8, 9));
});

test('no field name or value changes the shape of the query', () => {
  const shape = (f: Filter) => compileCondition(one(f), { now: NOW, segments: segments() }, []);
  const hostile = [`'; DROP TABLE contacts; --`, `\\`, `"}]}`, `a.b`, `{x,y}`, `$1`, `?`, `%_`, `' OR '1'='1`];
  const base = shape({ field: 'data.plan', operator: 'equals', value: 'x' });
  for (const h of hostile) {
    expect(shape({ field: 'data.plan', operator: 'equals', value: h })).toBe(base);
    expect(shape({ field: `data.${h.replace(/\./g, '')}`, operator: 'equals', value: 'x' })).toBe(base);
  }
  const ev = shape({ field: 'event.x', operator: 'triggered' });
  for (const h of hostile) expect(shape({ field: `event.${h}`, operator: 'triggered' })).toBe(ev);
  const em = shape({ field: 'email', operator: 'contains', value: 'x' });
  for (const h of hostile) expect(shape({ field: 'email', operator: 'contains', value: h })).toBe(em);
});

test('hostile names and values run safely and match nothing they should not', async () => {
  for (const h of [`'; DROP TABLE contacts; --`, `\\`, `"}]}`, `' OR '1'='1`, `%`]) {
    expect(await viaSql(one({ field: 'data.plan', operator: 'equals', value: h }))).toEqual([]);
    expect(await viaSql(one({ field: `data.${h}`, operator: 'exists' }))).toEqual([]);
    expect(await viaSql(one({ field: `event.${h}`, operator: 'triggered' }))).toEqual([]);
  }
  expect(await viaSql(one({ field: 'email', operator: 'contains', value: '%' }))).toEqual([contactIds[9]]);
  const [{ n }] = await sql<{ n: number }>(orm.em.fork(), `SELECT count(*)::int AS n FROM contacts`);
  expect(n).toBe(contactIds.length);
});

describe('validation', () => {
  test.each([
    [{}, /logic must be AND or OR/],
    [{ logic: 'AND', groups: [] }, /at least one group/],
    [{ logic: 'AND', groups: [{ filters: [] }] }, /needs a filter or nested conditions/],
    [one({ field: 'data.x', operator: 'resembles' }), /unknown operator resembles/],
    [one({ field: 'data.x', operator: 'equals' }), /needs a value/],
    [one({ field: 'createdAt', operator: 'within', value: 3 }), /needs unit days, hours or minutes/],
    [one({ field: 'createdAt', operator: 'within', value: 3, unit: 'weeks' }), /unit must be days, hours or minutes/],
    [one({ field: 'email', operator: 'greaterThan', value: 'a' }), /takes equals, notEquals, contains, notContains/],
    [one({ field: 'subscribed', operator: 'equals', value: 'yes' }), /true or false/],
    [one({ field: 'data.age', operator: 'greaterThan', value: 'old' }), /numbers or dates/],
    [one({ field: 'nickname', operator: 'equals', value: 'x' }), /unknown field nickname/],
    [one({ field: 'email.forwarded', operator: 'triggered' }), /unknown email activity/],
    [one({ field: 'segment.nope', operator: 'memberOfSegment' }), /names no segment id/],
    [one({ field: 'event.x', operator: 'equals', value: 1 }), /takes triggered/],
    [one({ field: 'topic.news', operator: 'subscribed' }), /names no topic id/],
    [one({ field: `topic.${newId()}`, operator: 'equals', value: true }), /takes subscribed, notSubscribed/],
    [one({ field: 'data.plan', operator: 'subscribed' }), /does not apply to data fields/],
  ])('%j is refused', (tree, message) => {
    expect(() => validateTree(tree)).toThrow(ConditionError);
    expect(() => validateTree(tree)).toThrow(message);
  });

  test('references to segments are reported, and a cycle is refused when compiling', () => {
    const a = newId();
    const b = newId();
    const refs = validateTree(one({ field: `segment.${a}`, operator: 'memberOfSegment' }));
    expect([...refs]).toEqual([a]);
    const cyclic = new Map<string, SegmentRef>([
      [a, { id: a, type: 'DYNAMIC', condition: one({ field: `segment.${b}`, operator: 'memberOfSegment' }) }],
      [b, { id: b, type: 'DYNAMIC', condition: one({ field: `segment.${a}`, operator: 'notMemberOfSegment' }) }],
    ]);
    expect(() => compileCondition(cyclic.get(a)!.condition!, { now: NOW, segments: cyclic }, [])).toThrow(/refers to itself/);
  });
});
