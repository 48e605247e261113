/**
 * proto3 canonical JSON for the HTTP API, both ways, over the same protobufjs root the gRPC side
 * uses: int64 as decimal strings, enums by name, bytes as base64, Timestamp as RFC 3339, Duration
 * as "1.5s", FieldMask as "a,b", Any with "@type", default values omitted on output. Field names
 * are lowerCamelCase (the descriptors' own); input also accepts the proto (snake_case) names.
 */
import Long from 'long';
import protobuf from 'protobufjs';
import { invalidArgument } from '../rpc/errors';
import { root } from '../proto';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Msg = Record<string, unknown>;

const LONG_TYPES = new Set(['int64', 'uint64', 'sint64', 'fixed64', 'sfixed64']);

/** 0, 3, 6 or 9 fractional digits, as the canonical encoding asks. */
function fraction(nanos: number): string {
  if (!nanos) return '';
  const nine = String(Math.abs(nanos)).padStart(9, '0');
  return `.${nine.endsWith('000000') ? nine.slice(0, 3) : nine.endsWith('000') ? nine.slice(0, 6) : nine}`;
}

function toNumber(v: unknown): number {
  if (Long.isLong(v)) return (v as Long).toNumber();
  return Number(v ?? 0);
}

function longString(v: unknown): string {
  if (Long.isLong(v)) return (v as Long).toString();
  if (typeof v === 'number') return String(Math.trunc(v));
  return String(v);
}

function isDefault(field: protobuf.Field, v: unknown): boolean {
  if (v == null) return true;
  if (field.repeated) return (v as unknown[]).length === 0;
  if (field.map) return Object.keys(v as object).length === 0;
  if (field.resolvedType instanceof protobuf.Type) return false;
  // A field of a proto3 `optional` (synthetic oneof) is present whenever it is set.
  if (field.partOf && field.partOf.oneof.length >= 1) return false;
  if (Long.isLong(v)) return (v as Long).isZero();
  if (v instanceof Uint8Array) return v.length === 0;
  return v === 0 || v === '' || v === false;
}

function scalarToJson(field: protobuf.Field, v: unknown): Json {
  const t = field.resolvedType;
  if (t instanceof protobuf.Enum) return t.valuesById[v as number] ?? (v as number);
  if (t instanceof protobuf.Type) return messageToJson(t, v as Msg);
  if (LONG_TYPES.has(field.type)) return longString(v);
  if (field.type === 'bytes') return Buffer.from(v as Uint8Array).toString('base64');
  if (field.type === 'double' || field.type === 'float') {
    const n = v as number;
    return Number.isFinite(n) ? n : Number.isNaN(n) ? 'NaN' : n > 0 ? 'Infinity' : '-Infinity';
  }
  return v as Json;
}

/** A decoded message (or a plain object shaped like one) to canonical JSON. */
export function messageToJson(type: protobuf.Type, msg: Msg): Json {
  switch (type.fullName) {
    case '.google.protobuf.Timestamp':
      return `${new Date(toNumber(msg.seconds) * 1000).toISOString().slice(0, 19)}${fraction(toNumber(msg.nanos))}Z`;
    case '.google.protobuf.Duration': {
      const seconds = toNumber(msg.seconds);
      const nanos = toNumber(msg.nanos);
      const sign = seconds < 0 || nanos < 0 ? '-' : '';
      return `${sign}${Math.abs(seconds)}${fraction(nanos)}s`;
    }
    case '.google.protobuf.FieldMask':
      return ((msg.paths as string[] | undefined) ?? []).join(',');
    case '.google.protobuf.Any': {
      const typeUrl = String(msg.type_url ?? msg.typeUrl ?? '');
      const inner = root.lookupType(typeUrl.slice(typeUrl.lastIndexOf('/') + 1));
      const body = messageToJson(inner, inner.decode(msg.value as Uint8Array) as unknown as Msg);
      return typeof body === 'object' && body && !Array.isArray(body) ? { '@type': typeUrl, ...body } : { '@type': typeUrl, value: body };
    }
  }
  const out: Record<string, Json> = {};
  for (const field of type.fieldsArray) {
    const v = msg[field.name];
    if (isDefault(field, v)) continue;
    if (field.map) {
      const m: Record<string, Json> = {};
      for (const [k, item] of Object.entries(v as object)) m[k] = scalarToJson(field, item);
      out[field.name] = m;
    } else if (field.repeated) {
      out[field.name] = (v as unknown[]).map((item) => scalarToJson(field, item));
    } else {
      out[field.name] = scalarToJson(field, v);
    }
  }
  return out;
}

const fail = (path: string, what: string) => invalidArgument(`invalid value for ${path || 'request'}: ${what}`);

function parseTimestamp(s: string, path: string): Msg {
  const m = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$/.exec(s);
  const ms = m ? Date.parse(`${m[1]}${m[3]}`) : NaN;
  if (!m || Number.isNaN(ms)) throw fail(path, `expected an RFC 3339 timestamp, got "${s}"`);
  return { seconds: Long.fromNumber(Math.floor(ms / 1000)), nanos: Number((m[2] ?? '').padEnd(9, '0')) };
}

function parseDuration(s: string, path: string): Msg {
  const m = /^(-)?(\d+)(?:\.(\d{1,9}))?s$/.exec(s);
  if (!m) throw fail(path, `expected a duration like "1.5s", got "${s}"`);
  const sign = m[1] ? -1 : 1;
  return { seconds: Long.fromString(m[2]).multiply(sign), nanos: sign * Number((m[3] ?? '').padEnd(9, '0')) };
}

function scalarFromJson(field: protobuf.Field, v: Json, path: string): unknown {
  const t = field.resolvedType;
  if (t instanceof protobuf.Enum) {
    if (typeof v === 'number') return v;
    if (typeof v === 'string' && /^-?\d+$/.test(v)) return Number(v);
    if (typeof v === 'string' && t.values[v] !== undefined) return t.values[v];
    throw fail(path, `unknown ${t.name} value ${JSON.stringify(v)}`);
  }
  if (t instanceof protobuf.Type) return messageFromJson(t, v, path);
  if (LONG_TYPES.has(field.type)) {
    if ((typeof v !== 'string' && typeof v !== 'number') || !/^-?\d+$/.test(String(v))) throw fail(path, 'expected an integer');
    return Long.fromString(String(v), field.type.startsWith('u') || field.type.startsWith('fixed'));
  }
  switch (field.type) {
    case 'bytes':
      if (typeof v !== 'string') throw fail(path, 'expected base64 bytes');
      return Buffer.from(v.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
    case 'bool':
      if (v === true || v === 'true') return true;
      if (v === false || v === 'false') return false;
      throw fail(path, 'expected a boolean');
    case 'string':
      if (typeof v !== 'string') throw fail(path, 'expected a string');
      return v;
    default: {
      const n = typeof v === 'string' && v.trim() !== '' ? Number(v) : v;
      if (typeof n !== 'number' || Number.isNaN(n)) throw fail(path, 'expected a number');
      if (field.type !== 'double' && field.type !== 'float' && !Number.isInteger(n)) throw fail(path, 'expected an integer');
      return n;
    }
  }
}

const camel = (name: string) => name.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());

/** Canonical JSON to a plain object protobufjs' `fromObject`/`encode` accept; rejects unknown fields. */
export function messageFromJson(type: protobuf.Type, json: Json, path = ''): Msg {
  switch (type.fullName) {
    case '.google.protobuf.Timestamp':
      if (typeof json !== 'string') throw fail(path, 'expected an RFC 3339 timestamp');
      return parseTimestamp(json, path);
    case '.google.protobuf.Duration':
      if (typeof json !== 'string') throw fail(path, 'expected a duration like "1.5s"');
      return parseDuration(json, path);
    case '.google.protobuf.FieldMask':
      if (typeof json !== 'string') throw fail(path, 'expected a comma-separated field mask');
      return { paths: json ? json.split(',') : [] };
  }
  if (json === null || typeof json !== 'object' || Array.isArray(json)) throw fail(path, `expected an object for ${type.name}`);
  const out: Msg = {};
  for (const [key, v] of Object.entries(json)) {
    const field = type.fields[key] ?? type.fields[camel(key)];
    const fieldPath = path ? `${path}.${key}` : key;
    if (!field) throw invalidArgument(`unknown field "${fieldPath}" in ${type.name}`);
    if (v === null) continue;
    if (field.map) {
      if (typeof v !== 'object' || Array.isArray(v)) throw fail(fieldPath, 'expected an object');
      const m: Record<string, unknown> = {};
      for (const [k, item] of Object.entries(v)) m[k] = scalarFromJson(field, item, `${fieldPath}.${k}`);
      out[field.name] = m;
    } else if (field.repeated) {
      const items = Array.isArray(v) ? v : [v];
      out[field.name] = items.map((item, i) => scalarFromJson(field, item, `${fieldPath}[${i}]`));
    } else {
      out[field.name] = scalarFromJson(field, v, fieldPath);
    }
  }
  return out;
}

/**
 * Query-string parameters (`a.b_c=1`, repeated keys for repeated fields) merged into a JSON object
 * at their field paths, as grpc-gateway reads them; values stay strings and are typed by `messageFromJson`.
 */
export function queryToJson(type: protobuf.Type, params: URLSearchParams, into: Record<string, Json>): void {
  for (const key of new Set(params.keys())) {
    const parts = key.split('.');
    let t: protobuf.Type = type;
    let obj = into;
    for (let i = 0; i < parts.length; i++) {
      const field = t.fields[parts[i]] ?? t.fields[camel(parts[i])];
      if (!field) throw invalidArgument(`unknown query parameter "${key}"`);
      if (i === parts.length - 1) {
        const values = params.getAll(key);
        obj[field.name] = field.repeated ? values : values[values.length - 1];
      } else {
        if (!(field.resolvedType instanceof protobuf.Type) || field.repeated) throw invalidArgument(`unknown query parameter "${key}"`);
        t = field.resolvedType;
        const next = obj[field.name];
        obj = (next && typeof next === 'object' && !Array.isArray(next) ? next : (obj[field.name] = {})) as Record<string, Json>;
      }
    }
  }
}

export type { Json };
