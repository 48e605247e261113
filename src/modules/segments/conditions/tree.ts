/**
 * The condition tree of segments and campaign audiences, and what each filter means. Both the SQL
 * compiler and the in-memory evaluator start from `resolveFilter`, so they cannot disagree about a
 * field, an operator, a value or a time window.
 */
import { isUuid } from '../../../db/ids';

export interface Filter {
  field: string;
  operator: string;
  value?: unknown;
  unit?: string;
}

export interface ConditionGroup {
  filters: Filter[];
  conditions?: ConditionTree;
}

export interface ConditionTree {
  logic: 'AND' | 'OR';
  groups: ConditionGroup[];
}

export class ConditionError extends Error {}

const VALUE_OPERATORS = ['equals', 'notEquals', 'contains', 'notContains', 'greaterThan', 'lessThan', 'greaterThanOrEqual', 'lessThanOrEqual'] as const;
const PRESENCE_OPERATORS = ['exists', 'notExists'] as const;
const TIME_OPERATORS = ['within', 'olderThan'] as const;
const EVENT_OPERATORS = ['triggered', 'notTriggered', 'triggeredWithin', 'triggeredOlderThan', 'notTriggeredWithin'] as const;
const SEGMENT_OPERATORS = ['memberOfSegment', 'notMemberOfSegment'] as const;
const TOPIC_OPERATORS = ['subscribed', 'notSubscribed'] as const;
export const OPERATORS = [...VALUE_OPERATORS, ...PRESENCE_OPERATORS, ...TIME_OPERATORS, ...EVENT_OPERATORS, ...SEGMENT_OPERATORS, ...TOPIC_OPERATORS] as const;
export type Operator = (typeof OPERATORS)[number];

export const UNITS = { minutes: 60_000, hours: 3_600_000, days: 86_400_000 } as const;

/** `email.<activity>` names and the event each stands for. */
export const EMAIL_ACTIVITIES: Record<string, string> = {
  open: 'email.open',
  opened: 'email.open',
  click: 'email.click',
  clicked: 'email.click',
  bounce: 'email.bounce',
  bounced: 'email.bounce',
  complaint: 'email.complaint',
  complained: 'email.complaint',
  sent: 'email.sent',
  delivery: 'email.delivery',
  delivered: 'email.delivery',
};

const DAY = /^(\d{4})-(\d{2})-(\d{2})$/;
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(\.\d{1,6})?)?(Z|[+-]\d{2}:?\d{2})?$/i;

/** Month, day, hour, minute and second ranges, checked so no lenient parser rolls 02-30 into March. */
function validParts(y: string, mo: string, d: string, h = '0', mi = '0', se = '0'): boolean {
  const [year, month, day] = [Number(y), Number(mo), Number(d)];
  if (year < 1 || month < 1 || month > 12 || day < 1) return false;
  if (day > new Date(Date.UTC(year, month, 0)).getUTCDate()) return false;
  return Number(h) <= 23 && Number(mi) <= 59 && Number(se) <= 59;
}

/**
 * Parses an ISO date or date-time; undefined when it is not one. The SQL function
 * postbox_parse_time (migration "audiences") accepts exactly the same strings, so data dates compare
 * the same in SQL and in memory. A date-time without an offset is UTC.
 */
export function parseDate(value: unknown): { at: number; wholeDay: boolean } | undefined {
  if (typeof value !== 'string') return undefined;
  const s = value.trim();
  const day = DAY.exec(s);
  if (day) return validParts(day[1], day[2], day[3]) ? { at: Date.parse(`${s}T00:00:00Z`), wholeDay: true } : undefined;
  const dt = DATE_TIME.exec(s);
  if (!dt || !validParts(dt[1], dt[2], dt[3], dt[4], dt[5], dt[6])) return undefined;
  const offset = dt[8] ? (dt[8].toUpperCase() === 'Z' ? 'Z' : dt[8].length === 5 ? `${dt[8].slice(0, 3)}:${dt[8].slice(3)}` : dt[8]) : 'Z';
  const at = Date.parse(`${dt[1]}-${dt[2]}-${dt[3]}T${dt[4]}:${dt[5]}:${dt[6] ?? '00'}${(dt[7] ?? '').slice(0, 4)}${offset}`);
  return Number.isNaN(at) ? undefined : { at, wholeDay: false };
}

export type Resolved =
  | { kind: 'email'; operator: 'equals' | 'notEquals' | 'contains' | 'notContains'; value: string }
  | { kind: 'subscribed'; operator: 'equals' | 'notEquals'; value: boolean }
  | { kind: 'date'; column: 'createdAt' | 'updatedAt'; test: DateTest }
  | { kind: 'data'; path: string[]; test: DataTest }
  | { kind: 'event'; name: string; operator: (typeof EVENT_OPERATORS)[number]; cutoff?: number }
  | { kind: 'segment'; segmentId: string; member: boolean }
  /** The contact's state in the topic is (or is not) 'subscribed'; the global flag is a filter of its own. */
  | { kind: 'topic'; topicId: string; subscribed: boolean };

/** A comparison of a point in time, already turned into bounds in epoch milliseconds. */
export type DateTest = { op: 'between'; from: number; to: number; negate: boolean } | { op: 'gt' | 'gte' | 'lt' | 'lte' | 'eq' | 'ne'; at: number };

export type DataTest =
  | { op: 'equals' | 'notEquals'; json: unknown }
  | { op: 'contains' | 'notContains'; json: unknown }
  | { op: 'exists' | 'notExists' }
  | { op: 'numeric'; cmp: 'gt' | 'gte' | 'lt' | 'lte'; number: number }
  | { op: 'date'; test: DateTest };

function needValue(f: Filter, where: string): unknown {
  if (f.value === undefined || f.value === null || f.value === '') {
    throw new ConditionError(`${where}: operator ${f.operator} needs a value`);
  }
  return f.value;
}

function windowCutoff(f: Filter, where: string, now: number): number {
  const n = Number(needValue(f, where));
  if (!Number.isFinite(n) || n < 0) throw new ConditionError(`${where}: ${f.operator} needs a non-negative number`);
  if (!f.unit || !(f.unit in UNITS)) throw new ConditionError(`${where}: ${f.operator} needs unit days, hours or minutes`);
  return now - n * UNITS[f.unit as keyof typeof UNITS];
}

const CMP = { greaterThan: 'gt', greaterThanOrEqual: 'gte', lessThan: 'lt', lessThanOrEqual: 'lte' } as const;

/** equals/notEquals/comparisons of a date value; a whole day (`YYYY-MM-DD`) covers that UTC day. */
function dateTest(f: Filter, where: string, now: number): DateTest {
  if (f.operator === 'within') return { op: 'gte', at: windowCutoff(f, where, now) };
  if (f.operator === 'olderThan') return { op: 'lt', at: windowCutoff(f, where, now) };
  const d = parseDate(needValue(f, where));
  if (!d) throw new ConditionError(`${where}: ${f.operator} needs a date (YYYY-MM-DD) or an ISO 8601 date-time`);
  const end = d.at + (d.wholeDay ? UNITS.days : 0);
  switch (f.operator) {
    case 'equals':
    case 'notEquals':
      return d.wholeDay ? { op: 'between', from: d.at, to: end, negate: f.operator === 'notEquals' } : { op: f.operator === 'equals' ? 'eq' : 'ne', at: d.at };
    case 'greaterThan':
      return d.wholeDay ? { op: 'gte', at: end } : { op: 'gt', at: d.at };
    case 'greaterThanOrEqual':
      return { op: 'gte', at: d.at };
    case 'lessThan':
      return { op: 'lt', at: d.at };
    case 'lessThanOrEqual':
      return d.wholeDay ? { op: 'lt', at: end } : { op: 'lte', at: d.at };
    default:
      throw new ConditionError(`${where}: operator ${f.operator} does not apply to dates`);
  }
}

function dataTest(f: Filter, where: string, now: number): DataTest {
  switch (f.operator) {
    case 'equals':
    case 'notEquals':
    case 'contains':
    case 'notContains':
      return { op: f.operator, json: needValue(f, where) };
    case 'exists':
    case 'notExists':
      return { op: f.operator };
    case 'within':
    case 'olderThan':
      return { op: 'date', test: dateTest(f, where, now) };
    case 'greaterThan':
    case 'greaterThanOrEqual':
    case 'lessThan':
    case 'lessThanOrEqual': {
      const v = needValue(f, where);
      const number = typeof v === 'number' ? v : typeof v === 'string' && /^-?\d+(\.\d+)?$/.test(v.trim()) ? Number(v) : undefined;
      if (number !== undefined && Number.isFinite(number)) return { op: 'numeric', cmp: CMP[f.operator], number };
      if (parseDate(v)) return { op: 'date', test: dateTest(f, where, now) };
      throw new ConditionError(`${where}: ${f.operator} compares numbers or dates`);
    }
    default:
      throw new ConditionError(`${where}: operator ${f.operator} does not apply to data fields`);
  }
}

function allow<T extends string>(f: Filter, where: string, allowed: readonly T[]): T {
  if (!(allowed as readonly string[]).includes(f.operator)) {
    throw new ConditionError(`${where}: field ${f.field} takes ${allowed.join(', ')}, not ${f.operator}`);
  }
  return f.operator as T;
}

/** What one filter means, with times resolved against `now`. Throws ConditionError on any misuse. */
export function resolveFilter(f: Filter, where: string, now: number): Resolved {
  if (!f || typeof f !== 'object') throw new ConditionError(`${where}: a filter must be an object`);
  if (typeof f.field !== 'string' || !f.field) throw new ConditionError(`${where}: field is required`);
  if (!(OPERATORS as readonly string[]).includes(f.operator)) throw new ConditionError(`${where}: unknown operator ${String(f.operator)}`);
  if (f.unit !== undefined && !(f.unit in UNITS)) throw new ConditionError(`${where}: unit must be days, hours or minutes`);
  const field = f.field;
  if (field === 'email') {
    const operator = allow(f, where, ['equals', 'notEquals', 'contains', 'notContains'] as const);
    const v = needValue(f, where);
    if (typeof v !== 'string') throw new ConditionError(`${where}: email filters compare text`);
    return { kind: 'email', operator, value: v.trim().toLowerCase() };
  }
  if (field === 'subscribed') {
    const operator = allow(f, where, ['equals', 'notEquals'] as const);
    const v = f.value;
    if (v !== true && v !== false && v !== 'true' && v !== 'false') throw new ConditionError(`${where}: subscribed compares with true or false`);
    return { kind: 'subscribed', operator, value: v === true || v === 'true' };
  }
  if (field === 'createdAt' || field === 'updatedAt') {
    allow(f, where, ['equals', 'notEquals', 'greaterThan', 'lessThan', 'greaterThanOrEqual', 'lessThanOrEqual', 'within', 'olderThan'] as const);
    return { kind: 'date', column: field, test: dateTest(f, where, now) };
  }
  if (field.startsWith('data.')) {
    const path = field.slice(5).split('.');
    if (path.some((k) => k.length === 0)) throw new ConditionError(`${where}: ${field} is not a data path`);
    return { kind: 'data', path, test: dataTest(f, where, now) };
  }
  const eventName = field.startsWith('event.') ? field.slice(6) : field.startsWith('email.') ? EMAIL_ACTIVITIES[field.slice(6)] : undefined;
  if (field.startsWith('email.') && !eventName) throw new ConditionError(`${where}: unknown email activity ${field.slice(6)}`);
  if (eventName !== undefined) {
    if (!eventName) throw new ConditionError(`${where}: ${field} names no event`);
    const operator = allow(f, where, EVENT_OPERATORS);
    const windowed = operator === 'triggeredWithin' || operator === 'triggeredOlderThan' || operator === 'notTriggeredWithin';
    return { kind: 'event', name: eventName, operator, cutoff: windowed ? windowCutoff(f, where, now) : undefined };
  }
  if (field.startsWith('segment.')) {
    const operator = allow(f, where, SEGMENT_OPERATORS);
    const segmentId = field.slice(8);
    if (!isUuid(segmentId)) throw new ConditionError(`${where}: ${field} names no segment id`);
    return { kind: 'segment', segmentId: segmentId.toLowerCase(), member: operator === 'memberOfSegment' };
  }
  if (field.startsWith('topic.')) {
    const operator = allow(f, where, TOPIC_OPERATORS);
    const topicId = field.slice(6);
    if (!isUuid(topicId)) throw new ConditionError(`${where}: ${field} names no topic id`);
    return { kind: 'topic', topicId: topicId.toLowerCase(), subscribed: operator === 'subscribed' };
  }
  throw new ConditionError(
    `${where}: unknown field ${field} (email, subscribed, createdAt, updatedAt, data.<path>, event.<name>, email.<activity>, segment.<id>, topic.<id>)`,
  );
}

/** Checks the shape of a tree and every filter in it; answers the segment ids it references. */
export function validateTree(tree: unknown, where = 'condition', now = Date.now()): Set<string> {
  const refs = new Set<string>();
  const walk = (t: unknown, at: string, depth: number) => {
    if (depth > 10) throw new ConditionError(`${at}: conditions nest at most 10 levels`);
    if (!t || typeof t !== 'object' || Array.isArray(t)) throw new ConditionError(`${at} must be an object`);
    const { logic, groups } = t as ConditionTree;
    if (logic !== 'AND' && logic !== 'OR') throw new ConditionError(`${at}.logic must be AND or OR`);
    if (!Array.isArray(groups) || groups.length === 0) throw new ConditionError(`${at}.groups needs at least one group`);
    groups.forEach((g, i) => {
      const gw = `${at}.groups.${i}`;
      if (!g || typeof g !== 'object') throw new ConditionError(`${gw} must be an object`);
      const filters = g.filters ?? [];
      if (!Array.isArray(filters)) throw new ConditionError(`${gw}.filters must be an array`);
      if (filters.length === 0 && !g.conditions) throw new ConditionError(`${gw} needs a filter or nested conditions`);
      filters.forEach((f, j) => {
        const r = resolveFilter(f, `${gw}.filters.${j}`, now);
        if (r.kind === 'segment') refs.add(r.segmentId);
      });
      if (g.conditions) walk(g.conditions, `${gw}.conditions`, depth + 1);
    });
  };
  walk(tree, where, 0);
  return refs;
}

/** The topics a tree's own filters name (segment references followed by the caller). */
export function topicIdsOf(tree: ConditionTree, now = Date.now()): Set<string> {
  const ids = new Set<string>();
  const walk = (t: ConditionTree) => {
    for (const g of t.groups) {
      for (const f of g.filters ?? []) {
        const r = resolveFilter(f, 'condition', now);
        if (r.kind === 'topic') ids.add(r.topicId);
      }
      if (g.conditions) walk(g.conditions);
    }
  };
  walk(tree);
  return ids;
}

/** Event names a tree needs to be evaluated for one contact (segment references followed by the caller). */
export function eventNamesOf(tree: ConditionTree, now = Date.now()): Set<string> {
  const names = new Set<string>();
  const walk = (t: ConditionTree) => {
    for (const g of t.groups) {
      for (const f of g.filters ?? []) {
        const r = resolveFilter(f, 'condition', now);
        if (r.kind === 'event') names.add(r.name);
      }
      if (g.conditions) walk(g.conditions);
    }
  };
  walk(tree);
  return names;
}
