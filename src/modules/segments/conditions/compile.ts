import { containsPattern } from '../../../db/like-pattern';
import { type ConditionTree, ConditionError, type DataTest, type DateTest, resolveFilter, type Resolved } from './tree';

/** A segment a condition may reference, as the compilers need it. */
export interface SegmentRef {
  id: string;
  type: 'DYNAMIC' | 'STATIC';
  condition: ConditionTree | null;
}

export interface CompileContext {
  /** The instant every time window is measured from; the evaluator is given the same one. */
  now: number;
  segments: ReadonlyMap<string, SegmentRef>;
}

/**
 * Compiles a condition tree into one SQL boolean expression over `contacts c`, with every value a
 * bound parameter (`?`): no field name or value can change the query's shape. Data paths travel as
 * text[] parameters, names of events and segments as values. `params` receives the values in order.
 */
export function compileCondition(tree: ConditionTree, ctx: CompileContext, params: unknown[]): string {
  return new Compiler(ctx, params).tree(tree, new Set());
}

/** Timestamps are compared only as `>= a` and `< b` at millisecond bounds, so microseconds in the
 *  database cannot make SQL and the in-memory evaluator (which sees milliseconds) disagree. */
export function halfOpen(test: DateTest): { from?: number; to?: number; negate: boolean } {
  switch (test.op) {
    case 'between':
      return { from: test.from, to: test.to, negate: test.negate };
    case 'gte':
      return { from: test.at, negate: false };
    case 'gt':
      return { from: test.at + 1, negate: false };
    case 'lt':
      return { to: test.at, negate: false };
    case 'lte':
      return { to: test.at + 1, negate: false };
    case 'eq':
      return { from: test.at, to: test.at + 1, negate: false };
    case 'ne':
      return { from: test.at, to: test.at + 1, negate: true };
  }
}

class Compiler {
  constructor(
    private readonly ctx: CompileContext,
    private readonly params: unknown[],
  ) {}

  private p(value: unknown, cast = ''): string {
    this.params.push(value);
    return `?${cast}`;
  }

  tree(tree: ConditionTree, visiting: Set<string>): string {
    const groups = tree.groups.map((g, i) => {
      const parts = (g.filters ?? []).map((f, j) => this.filter(resolveFilter(f, `groups.${i}.filters.${j}`, this.ctx.now), visiting));
      if (g.conditions) parts.push(this.tree(g.conditions, visiting));
      return parts.length ? `(${parts.join(' AND ')})` : 'TRUE';
    });
    return `(${groups.join(tree.logic === 'OR' ? ' OR ' : ' AND ')})`;
  }

  /** `expr` is called once per use: each `?` it writes is a parameter of its own. */
  private time(expr: () => string, test: DateTest): string {
    const { from, to, negate } = halfOpen(test);
    const bounds: string[] = [];
    if (from !== undefined) bounds.push(`${expr()} >= ${this.p(new Date(from).toISOString(), '::timestamptz')}`);
    if (to !== undefined) bounds.push(`${expr()} < ${this.p(new Date(to).toISOString(), '::timestamptz')}`);
    const inside = bounds.join(' AND ');
    return negate ? `(${expr()} IS NOT NULL AND NOT (${inside}))` : `(${inside})`;
  }

  private filter(r: Resolved, visiting: Set<string>): string {
    switch (r.kind) {
      case 'email': {
        if (r.operator === 'equals' || r.operator === 'notEquals') return `(c.email ${r.operator === 'equals' ? '=' : '<>'} ${this.p(r.value)})`;
        const like = containsPattern(r.value);
        return `(c.email ${r.operator === 'contains' ? '' : 'NOT '}ILIKE ${this.p(like)})`;
      }
      case 'subscribed':
        return `(c.subscribed ${r.operator === 'equals' ? '=' : '<>'} ${this.p(r.value, '::boolean')})`;
      case 'date':
        return this.time(() => (r.column === 'createdAt' ? 'c.created_at' : 'c.updated_at'), r.test);
      case 'data':
        return this.data(r.path, r.test);
      case 'event':
        return this.event(r);
      case 'segment': {
        const segment = this.ctx.segments.get(r.segmentId);
        if (!segment) throw new ConditionError(`segment ${r.segmentId} does not exist`);
        let member: string;
        if (segment.type === 'STATIC' || !segment.condition) {
          member =
            `EXISTS (SELECT 1 FROM segment_memberships m WHERE m.segment_id = ${this.p(segment.id, '::uuid')} ` +
            `AND m.contact_id = c.id AND m.exited_at IS NULL)`;
        } else {
          if (visiting.has(segment.id)) throw new ConditionError(`segment ${segment.id} refers to itself`);
          member = this.tree(segment.condition, new Set([...visiting, segment.id]));
        }
        return r.member ? member : `NOT ${member}`;
      }
      case 'topic': {
        // The contact's own row decides, else the topic's default; a topic that no longer exists is nobody's.
        const subscribed =
          `COALESCE((SELECT ct.state = 'subscribed' FROM contact_topics ct WHERE ct.contact_id = c.id AND ct.topic_id = ${this.p(r.topicId, '::uuid')}), ` +
          `(SELECT t.default_subscription = 'opt_in' FROM topics t WHERE t.id = ${this.p(r.topicId, '::uuid')}), false)`;
        return r.subscribed ? subscribed : `NOT ${subscribed}`;
      }
    }
  }

  private event(r: Extract<Resolved, { kind: 'event' }>): string {
    const exists = (cutoff?: number) =>
      `EXISTS (SELECT 1 FROM events e WHERE e.project_id = c.project_id AND e.contact_id = c.id AND e.name = ${this.p(r.name)}` +
      (cutoff !== undefined ? ` AND e.created_at >= ${this.p(new Date(cutoff).toISOString(), '::timestamptz')}` : '') +
      ')';
    switch (r.operator) {
      case 'triggered':
        return exists();
      case 'notTriggered':
        return `NOT ${exists()}`;
      case 'triggeredWithin':
        return exists(r.cutoff);
      case 'notTriggeredWithin':
        return `NOT ${exists(r.cutoff)}`;
      case 'triggeredOlderThan':
        return `(${exists()} AND NOT ${exists(r.cutoff)})`;
    }
  }

  private data(path: string[], test: DataTest): string {
    // Placeholders are positional: every mention of the value at `path` binds the path again.
    const x = () => `(c.data #> ${this.p(path, '::text[]')})`;
    const present = () => `(${x()} IS NOT NULL AND jsonb_typeof(${x()}) <> 'null')`;
    switch (test.op) {
      case 'exists':
        return present();
      case 'notExists':
        return `NOT ${present()}`;
      case 'equals': {
        // The containment test can use the GIN index on data; the equality makes it exact.
        const nested = path.reduceRight<unknown>((inner, key) => ({ [key]: inner }), test.json);
        return `(c.data @> ${this.p(JSON.stringify(nested), '::jsonb')} AND ${x()} = ${this.p(JSON.stringify(test.json), '::jsonb')})`;
      }
      case 'notEquals':
        return `(${present()} AND ${x()} <> ${this.p(JSON.stringify(test.json), '::jsonb')})`;
      case 'contains':
      case 'notContains': {
        const text = String(typeof test.json === 'object' ? JSON.stringify(test.json) : test.json).toLowerCase();
        const presence = present();
        const contains =
          `(CASE jsonb_typeof(${x()}) WHEN 'string' THEN position(${this.p(text)} in lower(${x()} #>> '{}')) > 0 ` +
          `WHEN 'array' THEN ${x()} @> ${this.p(JSON.stringify([test.json]), '::jsonb')} ELSE false END)`;
        return test.op === 'contains' ? `(${presence} AND ${contains})` : `(${presence} AND NOT ${contains})`;
      }
      case 'numeric': {
        // A strict-mode jsonpath (one bound value): only a number at exactly this path compares, no cast can
        // fail, and it scans twice as fast as extracting the text and casting it. Keys are JSON-quoted.
        const op = { gt: '>', gte: '>=', lt: '<', lte: '<=' }[test.cmp];
        const jsonPath = `strict $${path.map((k) => `.${JSON.stringify(k)}`).join('')} ? (@ ${op} ${JSON.stringify(test.number)})`;
        return `COALESCE(jsonb_path_exists(c.data, ${this.p(jsonPath, '::jsonpath')}, '{}', true), false)`;
      }
      case 'date':
        return `(jsonb_typeof(${x()}) = 'string' AND ${this.time(() => `postbox_parse_time(${x()} #>> '{}')`, test.test)})`;
    }
  }
}
