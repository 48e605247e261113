/**
 * The one protobuf root every part of the dev server encodes and decodes with: the JSON descriptors
 * shipped in @temporalio/proto, i.e. the very root the SDK itself uses (one protobufjs copy, so
 * `historyFromJSON` and friends keep working).
 */
import Long from 'long';
import protobuf from 'protobufjs';
import { temporal, google } from '@temporalio/proto';
// eslint-disable-next-line @typescript-eslint/no-require-imports
const jsonRoot: protobuf.Root = require('@temporalio/proto/protos/json-module');

jsonRoot.resolveAll();
export const root = jsonRoot;

export { temporal, google };
export const api = temporal.api;
export const enums = temporal.api.enums.v1;

/** A message type whose int64 fields may also be plain numbers (protobufjs encodes both). */
export type Loose<T> = T extends Long
  ? Long | number
  : T extends Uint8Array
    ? T
    : T extends (infer U)[]
      ? Loose<U>[]
      : T extends object
        ? { [K in keyof T]?: Loose<T[K]> | null }
        : T;

export type IHistoryEvent = temporal.api.history.v1.IHistoryEvent;
export type IPayloads = temporal.api.common.v1.IPayloads;
export type IPayload = temporal.api.common.v1.IPayload;
export type IFailure = temporal.api.failure.v1.IFailure;
export type IMemo = temporal.api.common.v1.IMemo;
export type ISearchAttributes = temporal.api.common.v1.ISearchAttributes;
export type IRetryPolicy = temporal.api.common.v1.IRetryPolicy;
export type IHeader = temporal.api.common.v1.IHeader;
export type IWorkflowExecution = temporal.api.common.v1.IWorkflowExecution;
export type ITimestamp = google.protobuf.ITimestamp;
export type IDuration = google.protobuf.IDuration;

export const HistoryEvent = temporal.api.history.v1.HistoryEvent;
export const Failure = temporal.api.failure.v1.Failure;
export const Payloads = temporal.api.common.v1.Payloads;
export const Memo = temporal.api.common.v1.Memo;
export const SearchAttributes = temporal.api.common.v1.SearchAttributes;

/** int64 fields decode as Long; everything in the engine is a plain number (ms, ids). */
export function num(v: Long | number | string | null | undefined): number {
  if (v == null) return 0;
  if (typeof v === 'number') return v;
  if (typeof v === 'string') return Number(v);
  return v.toNumber();
}

export function tsToMs(ts: ITimestamp | null | undefined): number | undefined {
  if (!ts) return undefined;
  return num(ts.seconds as Long | number) * 1000 + Math.floor((ts.nanos ?? 0) / 1e6);
}

export function msToTs(ms: number): Loose<ITimestamp> {
  const seconds = Math.floor(ms / 1000);
  return { seconds, nanos: (ms - seconds * 1000) * 1e6 };
}

/** Missing and zero durations both mean "not set" in Temporal's API. */
export function durToMs(d: IDuration | null | undefined): number {
  if (!d) return 0;
  return num(d.seconds as Long | number) * 1000 + Math.floor((d.nanos ?? 0) / 1e6);
}

export function msToDur(ms: number | undefined): Loose<IDuration> | undefined {
  if (!ms) return undefined;
  const seconds = Math.floor(ms / 1000);
  return { seconds, nanos: Math.round((ms - seconds * 1000) * 1e6) };
}

/** A Duration that is always present: zero means "unlimited" where the SDK requires the field. */
export function msToDurAlways(ms: number): Loose<IDuration> {
  return msToDur(ms) ?? { seconds: 0, nanos: 0 };
}

// ---- Length-delimited framing, to splice already-encoded events into a response without re-encoding.

function varint(n: number): Buffer {
  const bytes: number[] = [];
  while (n > 0x7f) {
    bytes.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  bytes.push(n);
  return Buffer.from(bytes);
}

/** Tag + length prefix of a length-delimited field. */
export function fieldHeader(fieldNumber: number, length: number): Buffer {
  return Buffer.concat([varint((fieldNumber << 3) | 2), varint(length)]);
}

/** A `History` message body made of already-encoded `HistoryEvent`s (History.events is field 1). */
export function encodeHistoryBody(events: readonly Uint8Array[]): Buffer {
  const parts: Uint8Array[] = [];
  for (const e of events) {
    parts.push(fieldHeader(1, e.length), e);
  }
  return Buffer.concat(parts);
}

/**
 * Encodes `message` with `type`, then appends an already-encoded History as field `historyField`.
 * Protobuf allows fields in any order, so this equals encoding the whole message at once.
 */
export function encodeWithHistory(type: { encode(m: object): protobuf.Writer }, message: object, historyField: number, events: readonly Uint8Array[]): Buffer {
  const head = type.encode(message).finish();
  const body = encodeHistoryBody(events);
  return Buffer.concat([head, fieldHeader(historyField, body.length), body]);
}

/** Splits an encoded `History` body back into its encoded events. */
export function splitHistoryBody(body: Uint8Array): Buffer[] {
  const reader = protobuf.Reader.create(body);
  const out: Buffer[] = [];
  while (reader.pos < reader.len) {
    const tag = reader.uint32();
    if (tag >>> 3 === 1 && (tag & 7) === 2) out.push(ownedCopy(reader.bytes()));
    else reader.skipType(tag & 7);
  }
  return out;
}

/**
 * A standalone copy of `bytes`. Small Buffers normally live in shared 8 KB pool slabs, and one kept
 * event would keep its whole slab alive: histories are kept for long, so they get their own memory.
 */
export function ownedCopy(bytes: Uint8Array): Buffer {
  const out = Buffer.allocUnsafeSlow(bytes.length);
  out.set(bytes);
  return out;
}

export function encodeEvent(event: Loose<IHistoryEvent> | Record<string, unknown>): Buffer {
  return ownedCopy(HistoryEvent.encode(event as temporal.api.history.v1.HistoryEvent).finish());
}

export function decodeEvent(bytes: Uint8Array): temporal.api.history.v1.HistoryEvent {
  return HistoryEvent.decode(bytes);
}

export function encodeB64(type: { encode(m: object): protobuf.Writer }, message: object | null | undefined): string | undefined {
  if (!message) return undefined;
  return Buffer.from(type.encode(message).finish()).toString('base64');
}

export function decodeB64<T>(type: { decode(b: Uint8Array): T }, b64: string | undefined): T | undefined {
  if (!b64) return undefined;
  return type.decode(Buffer.from(b64, 'base64'));
}

export { Long };
