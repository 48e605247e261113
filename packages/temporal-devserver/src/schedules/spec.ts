/**
 * Schedule specs: cron strings and string calendars compiled into structured calendars (as Temporal
 * answers them in DescribeSchedule), and the times a spec matches, in its time zone. Also the cron
 * strings of cron workflows (`cronSchedule`), which use the same language.
 */
import { durToMs, type IDuration, msToDur, tsToMs, type temporal } from '../proto';

type IRange = temporal.api.schedule.v1.IRange;
type IStructured = temporal.api.schedule.v1.IStructuredCalendarSpec;
type ISpec = temporal.api.schedule.v1.IScheduleSpec;

export class SpecError extends Error {}

const dur = (ms: number) => msToDur(ms) as IDuration | undefined;

interface FieldDef {
  key: keyof Omit<IStructured, 'comment'>;
  min: number;
  max: number;
  names?: string[];
  /** What an absent field means: a fixed value, or everything. */
  absent: 'zero' | 'all';
}

const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const DAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];
const F: Record<string, FieldDef> = {
  second: { key: 'second', min: 0, max: 59, absent: 'zero' },
  minute: { key: 'minute', min: 0, max: 59, absent: 'zero' },
  hour: { key: 'hour', min: 0, max: 23, absent: 'zero' },
  dayOfMonth: { key: 'dayOfMonth', min: 1, max: 31, absent: 'all' },
  month: { key: 'month', min: 1, max: 12, names: MONTHS, absent: 'all' },
  year: { key: 'year', min: 1970, max: 2999, absent: 'all' },
  dayOfWeek: { key: 'dayOfWeek', min: 0, max: 7, names: DAYS, absent: 'all' },
};

// ------------------------------------------------------------------ parsing

function parseValue(text: string, f: FieldDef): number {
  const named = /^[a-z]{3,}$/i.test(text) ? (f.names?.indexOf(text.slice(0, 3).toLowerCase()) ?? -1) : -1;
  const v = named >= 0 ? named + (f.key === 'month' ? 1 : 0) : /^\d+$/.test(text) ? Number(text) : NaN;
  if (!Number.isInteger(v) || v < f.min || v > f.max) throw new SpecError(`invalid ${f.key} value "${text}"`);
  return v;
}

/** One cron / string-calendar field ("*", "5", "1-5", "*\/15", "mon-fri", "1,15,30") as ranges. */
function parseField(text: string, f: FieldDef): IRange[] {
  const out: IRange[] = [];
  for (const part of text.split(',')) {
    const [base, stepText] = part.split('/');
    const step = stepText === undefined ? 1 : Number(stepText);
    if (!Number.isInteger(step) || step < 1) throw new SpecError(`invalid step in ${f.key} "${part}"`);
    let start: number;
    let end: number;
    if (base === '*' || base === '?') {
      start = f.key === 'dayOfWeek' ? 0 : f.min;
      end = f.key === 'dayOfWeek' ? 6 : f.max;
    } else if (base.includes('-')) {
      const [a, b] = base.split('-');
      start = parseValue(a, f);
      end = parseValue(b, f);
    } else {
      start = parseValue(base, f);
      end = stepText === undefined ? start : f.max;
    }
    if (end < start) throw new SpecError(`invalid range in ${f.key} "${part}"`);
    out.push({ start, end, step });
  }
  return out;
}

const SHORTHANDS: Record<string, string> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
};

function parseDuration(text: string): number {
  const m = /^(\d+)(ms|s|m|h|d)$/.exec(text);
  if (!m) throw new SpecError(`invalid duration "${text}"`);
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2]]!;
  return Number(m[1]) * unit;
}

export interface CompiledCron {
  calendar?: IStructured;
  interval?: { everyMs: number; phaseMs: number };
  timezone?: string;
  comment?: string;
}

/**
 * A cron string: 5 fields (minute hour day-of-month month day-of-week), 6 (plus year) or 7 (second
 * first, year last); `@hourly`-style shorthands; `@every 2s[/1s]`; optional `CRON_TZ=` / `TZ=` prefix
 * and `#` comment, as Temporal accepts them.
 */
export function parseCron(input: string): CompiledCron {
  let text = input.trim();
  const out: CompiledCron = {};
  const hash = text.indexOf('#');
  if (hash >= 0) {
    out.comment = text.slice(hash + 1).trim();
    text = text.slice(0, hash).trim();
  }
  const tz = /^(?:CRON_TZ|TZ)=(\S+)\s+/.exec(text);
  if (tz) {
    out.timezone = tz[1];
    text = text.slice(tz[0].length);
  }
  if (text.startsWith('@every ')) {
    const [every, phase] = text.slice(7).trim().split('/');
    out.interval = { everyMs: parseDuration(every), phaseMs: phase ? parseDuration(phase) : 0 };
    if (out.interval.everyMs <= 0) throw new SpecError('interval must be positive');
    return out;
  }
  text = SHORTHANDS[text] ?? text;
  const fields = text.split(/\s+/);
  let names: string[];
  if (fields.length === 5) names = ['minute', 'hour', 'dayOfMonth', 'month', 'dayOfWeek'];
  else if (fields.length === 6) names = ['minute', 'hour', 'dayOfMonth', 'month', 'dayOfWeek', 'year'];
  else if (fields.length === 7) names = ['second', 'minute', 'hour', 'dayOfMonth', 'month', 'dayOfWeek', 'year'];
  else throw new SpecError(`cron string "${input}" must have 5, 6 or 7 fields`);
  const cal: IStructured = { second: [{ start: 0, end: 0, step: 1 }] };
  names.forEach((name, i) => {
    if (name === 'year' && fields[i] === '*') return;
    (cal as Record<string, IRange[]>)[name] = parseField(fields[i], F[name]);
  });
  out.calendar = cal;
  return out;
}

function compileStringCalendar(c: temporal.api.schedule.v1.ICalendarSpec): IStructured {
  const cal: IStructured = { comment: c.comment ?? undefined };
  for (const name of Object.keys(F)) {
    const text = (c as Record<string, string | null | undefined>)[name];
    if (text) (cal as Record<string, IRange[]>)[name] = parseField(text, F[name]);
  }
  return cal;
}

/**
 * The spec as Temporal keeps it: cron strings and string calendars compiled into structured
 * calendars and intervals, ranges checked. Throws SpecError for anything invalid.
 */
export function compileSpec(spec: ISpec | null | undefined): ISpec {
  const s = spec ?? {};
  const structured = [...(s.structuredCalendar ?? [])];
  const intervals = [...(s.interval ?? [])];
  let timezoneName = s.timezoneName ?? '';
  for (const c of s.calendar ?? []) structured.push(compileStringCalendar(c));
  for (const cron of s.cronString ?? []) {
    const compiled = parseCron(cron);
    if (compiled.timezone) timezoneName = compiled.timezone;
    if (compiled.interval) intervals.push({ interval: dur(compiled.interval.everyMs), phase: dur(compiled.interval.phaseMs) });
    if (compiled.calendar) structured.push({ ...compiled.calendar, comment: compiled.comment });
  }
  for (const cal of [...structured, ...(s.excludeStructuredCalendar ?? [])]) checkCalendar(cal);
  for (const i of intervals) {
    if (durToMs(i.interval) <= 0) throw new SpecError('interval must be positive');
    if (durToMs(i.phase) < 0) throw new SpecError('phase must not be negative');
  }
  if (timezoneName) zoneFormatter(timezoneName);
  const exclude = [...(s.excludeStructuredCalendar ?? []), ...(s.excludeCalendar ?? []).map(compileStringCalendar)];
  return {
    structuredCalendar: structured,
    interval: intervals,
    excludeStructuredCalendar: exclude,
    startTime: s.startTime ?? undefined,
    endTime: s.endTime ?? undefined,
    jitter: s.jitter ?? undefined,
    timezoneName,
  };
}

function checkCalendar(cal: IStructured): void {
  for (const f of Object.values(F)) {
    for (const r of (cal[f.key] as IRange[] | null | undefined) ?? []) {
      const start = r.start ?? 0;
      const end = Math.max(start, r.end ?? 0);
      if (start < (f.key === 'year' ? 0 : f.min) || end > f.max) throw new SpecError(`${f.key} range ${start}-${end} is out of bounds`);
    }
  }
}

// ------------------------------------------------------------------ time zones

const formatters = new Map<string, Intl.DateTimeFormat>();

function zoneFormatter(tz: string): Intl.DateTimeFormat {
  let f = formatters.get(tz);
  if (!f) {
    try {
      f = new Intl.DateTimeFormat('en-US', {
        timeZone: tz,
        hourCycle: 'h23',
        year: 'numeric',
        month: 'numeric',
        day: 'numeric',
        hour: 'numeric',
        minute: 'numeric',
        second: 'numeric',
      });
    } catch {
      throw new SpecError(`unknown time zone "${tz}"`);
    }
    formatters.set(tz, f);
  }
  return f;
}

interface Wall {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
}

function isUtc(tz: string): boolean {
  return !tz || tz === 'UTC' || tz === 'Etc/UTC';
}

function wallOf(ms: number, tz: string): Wall {
  if (isUtc(tz)) {
    const d = new Date(ms);
    return {
      year: d.getUTCFullYear(),
      month: d.getUTCMonth() + 1,
      day: d.getUTCDate(),
      hour: d.getUTCHours(),
      minute: d.getUTCMinutes(),
      second: d.getUTCSeconds(),
    };
  }
  const parts: Record<string, number> = {};
  for (const p of zoneFormatter(tz).formatToParts(new Date(ms))) if (p.type !== 'literal') parts[p.type] = Number(p.value);
  return { year: parts.year, month: parts.month, day: parts.day, hour: parts.hour, minute: parts.minute, second: parts.second };
}

/** The instant a wall-clock time in `tz` denotes (a time in a DST gap moves forward by the gap). */
function instantOf(w: Wall, tz: string): number {
  const asUtc = Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute, w.second);
  if (isUtc(tz)) return asUtc;
  const offsetAt = (ms: number) => {
    const v = wallOf(ms, tz);
    return Date.UTC(v.year, v.month - 1, v.day, v.hour, v.minute, v.second) - Math.floor(ms / 1000) * 1000;
  };
  let t = asUtc - offsetAt(asUtc);
  const second = asUtc - offsetAt(t);
  if (second !== t) t = Math.max(t, second);
  return t;
}

// ------------------------------------------------------------------ matching times

function values(ranges: IRange[] | null | undefined, f: FieldDef): number[] | undefined {
  if (!ranges?.length) return f.absent === 'zero' ? [0] : undefined;
  const out = new Set<number>();
  for (const r of ranges) {
    const start = r.start ?? 0;
    const end = Math.max(start, r.end ?? 0);
    const step = r.step && r.step > 0 ? r.step : 1;
    for (let v = start; v <= end; v += step) out.add(f.key === 'dayOfWeek' && v === 7 ? 0 : v);
  }
  return [...out].sort((a, b) => a - b);
}

interface CalendarSets {
  second: number[];
  minute: number[];
  hour: number[];
  dayOfMonth?: Set<number>;
  month?: Set<number>;
  year?: Set<number>;
  dayOfWeek?: Set<number>;
}

function sets(cal: IStructured): CalendarSets {
  const set = (f: FieldDef) => {
    const v = values(cal[f.key] as IRange[], f);
    return v ? new Set(v) : undefined;
  };
  return {
    second: values(cal.second, F.second)!,
    minute: values(cal.minute, F.minute)!,
    hour: values(cal.hour, F.hour)!,
    dayOfMonth: set(F.dayOfMonth),
    month: set(F.month),
    year: set(F.year),
    dayOfWeek: set(F.dayOfWeek),
  };
}

function dayMatches(c: CalendarSets, year: number, month: number, day: number): boolean {
  if (c.year && !c.year.has(year)) return false;
  if (c.month && !c.month.has(month)) return false;
  if (c.dayOfMonth && !c.dayOfMonth.has(day)) return false;
  if (c.dayOfWeek && !c.dayOfWeek.has(new Date(Date.UTC(year, month - 1, day)).getUTCDay())) return false;
  return true;
}

function calendarMatches(cal: IStructured, ms: number, tz: string): boolean {
  const c = sets(cal);
  const w = wallOf(ms, tz);
  return dayMatches(c, w.year, w.month, w.day) && c.hour.includes(w.hour) && c.minute.includes(w.minute) && c.second.includes(w.second);
}

const SEARCH_YEARS = 100;

/** The first time after `after` a structured calendar matches in `tz`. */
function nextCalendarTime(cal: IStructured, after: number, tz: string): number | undefined {
  const c = sets(cal);
  const from = wallOf(after, tz);
  let date = new Date(Date.UTC(from.year, from.month - 1, from.day));
  const lastYear = from.year + SEARCH_YEARS;
  let first = true;
  while (date.getUTCFullYear() <= lastYear) {
    const year = date.getUTCFullYear();
    const month = date.getUTCMonth() + 1;
    if (c.year && !c.year.has(year)) {
      date = new Date(Date.UTC(year + 1, 0, 1));
      first = false;
      continue;
    }
    if (c.month && !c.month.has(month)) {
      date = new Date(Date.UTC(year, month, 1));
      first = false;
      continue;
    }
    const day = date.getUTCDate();
    if (dayMatches(c, year, month, day)) {
      for (const hour of c.hour) {
        if (first && hour < from.hour) continue;
        for (const minute of c.minute) {
          if (first && hour === from.hour && minute < from.minute) continue;
          for (const second of c.second) {
            const t = instantOf({ year, month, day, hour, minute, second }, tz);
            if (t > after) return t;
          }
        }
      }
    }
    date = new Date(Date.UTC(year, month - 1, day + 1));
    first = false;
  }
  return undefined;
}

function nextIntervalTime(i: temporal.api.schedule.v1.IIntervalSpec, after: number): number {
  const every = durToMs(i.interval);
  const phase = durToMs(i.phase) % every;
  return phase + every * (Math.floor((after - phase) / every) + 1);
}

/** The first time after `after` a compiled spec fires (its nominal time, without jitter), or undefined. */
export function nextTime(spec: ISpec, after: number): number | undefined {
  const start = tsToMs(spec.startTime);
  const end = tsToMs(spec.endTime);
  const tz = spec.timezoneName ?? '';
  let t = start !== undefined && start - 1 > after ? start - 1 : after;
  for (let guard = 0; guard < 10_000; guard++) {
    let best: number | undefined;
    for (const cal of spec.structuredCalendar ?? []) {
      const n = nextCalendarTime(cal, t, tz);
      if (n !== undefined && (best === undefined || n < best)) best = n;
    }
    for (const i of spec.interval ?? []) {
      const n = nextIntervalTime(i, t);
      if (best === undefined || n < best) best = n;
    }
    if (best === undefined || (end !== undefined && best > end)) return undefined;
    if (!(spec.excludeStructuredCalendar ?? []).some((x) => calendarMatches(x, best!, tz))) return best;
    t = best;
  }
  return undefined;
}

/** Nominal times in (from, to], at most `limit`. */
export function timesBetween(spec: ISpec, from: number, to: number, limit = 10_000): number[] {
  const out: number[] = [];
  let t = from;
  while (out.length < limit) {
    const n = nextTime(spec, t);
    if (n === undefined || n > to) break;
    out.push(n);
    t = n;
  }
  return out;
}

/** The jitter of one nominal time: a stable pseudo-random delay below the spec's jitter and the gap to the next time. */
export function jitterOf(spec: ISpec, key: string, nominal: number): number {
  const max = durToMs(spec.jitter);
  if (!max) return 0;
  const next = nextTime(spec, nominal);
  const bound = Math.min(max, next !== undefined ? next - nominal : max);
  let h = 2166136261;
  for (const ch of `${key}@${nominal}`) h = Math.imul(h ^ ch.charCodeAt(0), 16777619) >>> 0;
  return bound > 0 ? h % bound : 0;
}

/** What is wrong with a cron workflow's schedule, or undefined. */
export function cronError(cron: string): string | undefined {
  try {
    parseCron(cron);
    return undefined;
  } catch (err) {
    if (err instanceof SpecError) return err.message;
    throw err;
  }
}

/** For cron workflows: the delay from `now` until the cron string next fires (undefined: never again). */
export function cronBackoff(cron: string, now: number): number | undefined {
  const c = parseCron(cron);
  const spec: ISpec = c.interval
    ? { interval: [{ interval: dur(c.interval.everyMs), phase: dur(c.interval.phaseMs) }] }
    : { structuredCalendar: [c.calendar!], timezoneName: c.timezone ?? '' };
  // Cron workflows fire on whole seconds, as Temporal's (robfig) cron does.
  const next = nextTime(spec, Math.floor(now / 1000) * 1000 + 999);
  return next === undefined ? undefined : Math.max(0, next - now);
}
