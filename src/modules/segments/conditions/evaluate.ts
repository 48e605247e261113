import { type CompileContext, halfOpen } from './compile';
import { type ConditionTree, ConditionError, type DataTest, type DateTest, parseDate, resolveFilter, type Resolved } from './tree';

/** What the evaluator knows about one contact. */
export interface ContactFacts {
  email: string;
  subscribed: boolean;
  createdAt: Date;
  updatedAt: Date;
  data: Record<string, unknown>;
  /** The latest time each event name was recorded for this contact (at least those the tree uses). */
  lastEventAt: ReadonlyMap<string, number>;
  /** Static segments the contact is a current member of. */
  staticSegments: ReadonlySet<string>;
  /** The topics the contact receives (state 'subscribed', defaults applied). */
  subscribedTopics: ReadonlySet<string>;
}

function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== 'object') return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) return a.length === (b as unknown[]).length && a.every((v, i) => jsonEqual(v, (b as unknown[])[i]));
  const ka = Object.keys(a as object);
  const kb = Object.keys(b as object);
  return (
    ka.length === kb.length &&
    ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && jsonEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]))
  );
}

/** jsonb @> for the array-contains case: some element equals the value, or contains it when both are containers. */
function arrayContains(arr: unknown[], value: unknown): boolean {
  return arr.some((el) => jsonContains(el, value));
}

function jsonContains(container: unknown, value: unknown): boolean {
  if (Array.isArray(container)) return Array.isArray(value) ? value.every((v) => arrayContains(container, v)) : arrayContains(container, value) || false;
  if (container && typeof container === 'object' && value && typeof value === 'object' && !Array.isArray(value)) {
    return Object.entries(value).every(
      ([k, v]) => Object.prototype.hasOwnProperty.call(container, k) && jsonContains((container as Record<string, unknown>)[k], v),
    );
  }
  return jsonEqual(container, value);
}

function inTime(at: number | undefined, test: DateTest): boolean {
  if (at === undefined) return false;
  const { from, to, negate } = halfOpen(test);
  const inside = (from === undefined || at >= from) && (to === undefined || at < to);
  return negate ? !inside : inside;
}

function lookup(data: Record<string, unknown>, path: string[]): unknown {
  let v: unknown = data;
  for (const k of path) {
    if (v === null || typeof v !== 'object' || Array.isArray(v) || !Object.prototype.hasOwnProperty.call(v, k)) return undefined;
    v = (v as Record<string, unknown>)[k];
  }
  return v;
}

function dataMatches(value: unknown, test: DataTest): boolean {
  const present = value !== undefined && value !== null;
  switch (test.op) {
    case 'exists':
      return present;
    case 'notExists':
      return !present;
    case 'equals':
      return present && jsonEqual(value, test.json);
    case 'notEquals':
      return present && !jsonEqual(value, test.json);
    case 'contains':
    case 'notContains': {
      if (!present) return false;
      const needle = String(typeof test.json === 'object' ? JSON.stringify(test.json) : test.json).toLowerCase();
      const contains = typeof value === 'string' ? value.toLowerCase().includes(needle) : Array.isArray(value) ? arrayContains(value, test.json) : false;
      return test.op === 'contains' ? contains : !contains;
    }
    case 'numeric':
      if (typeof value !== 'number') return false;
      return { gt: value > test.number, gte: value >= test.number, lt: value < test.number, lte: value <= test.number }[test.cmp];
    case 'date':
      return typeof value === 'string' && inTime(parseDate(value)?.at, test.test);
  }
}

/**
 * Evaluates a condition tree for one contact in memory, with exactly the meaning of the SQL
 * compiler (a test runs both over the same fixtures). Used to update tracked segments as single
 * contacts change, without a query per segment.
 */
export function evaluateCondition(tree: ConditionTree, facts: ContactFacts, ctx: CompileContext, visiting = new Set<string>()): boolean {
  const filter = (r: Resolved): boolean => {
    switch (r.kind) {
      case 'email':
        switch (r.operator) {
          case 'equals':
            return facts.email === r.value;
          case 'notEquals':
            return facts.email !== r.value;
          case 'contains':
            return facts.email.includes(r.value);
          case 'notContains':
            return !facts.email.includes(r.value);
        }
      // eslint-disable-next-line no-fallthrough
      case 'subscribed':
        return r.operator === 'equals' ? facts.subscribed === r.value : facts.subscribed !== r.value;
      case 'date':
        return inTime((r.column === 'createdAt' ? facts.createdAt : facts.updatedAt).getTime(), r.test);
      case 'data':
        return dataMatches(lookup(facts.data, r.path), r.test);
      case 'event': {
        const last = facts.lastEventAt.get(r.name);
        switch (r.operator) {
          case 'triggered':
            return last !== undefined;
          case 'notTriggered':
            return last === undefined;
          case 'triggeredWithin':
            return last !== undefined && last >= r.cutoff!;
          case 'notTriggeredWithin':
            return last === undefined || last < r.cutoff!;
          case 'triggeredOlderThan':
            return last !== undefined && last < r.cutoff!;
        }
      }
      // eslint-disable-next-line no-fallthrough
      case 'segment': {
        const segment = ctx.segments.get(r.segmentId);
        if (!segment) throw new ConditionError(`segment ${r.segmentId} does not exist`);
        let member: boolean;
        if (segment.type === 'STATIC' || !segment.condition) member = facts.staticSegments.has(segment.id);
        else {
          if (visiting.has(segment.id)) throw new ConditionError(`segment ${segment.id} refers to itself`);
          member = evaluateCondition(segment.condition, facts, ctx, new Set([...visiting, segment.id]));
        }
        return r.member === member;
      }
      case 'topic':
        return facts.subscribedTopics.has(r.topicId) === r.subscribed;
    }
  };
  const group = (g: ConditionTree['groups'][number], i: number) =>
    (g.filters ?? []).every((f, j) => filter(resolveFilter(f, `groups.${i}.filters.${j}`, ctx.now))) &&
    (!g.conditions || evaluateCondition(g.conditions, facts, ctx, visiting));
  return tree.logic === 'OR' ? tree.groups.some(group) : tree.groups.every(group);
}
