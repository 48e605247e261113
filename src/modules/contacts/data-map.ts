import { z } from 'zod';

/** Keys the service owns; silently dropped from every data map. */
export const RESERVED_DATA_KEYS = new Set(['id', 'svc_id', 'svc_email', 'email', 'unsubscribeUrl', 'subscribeUrl', 'manageUrl']);

const transientValue = z.object({ value: z.unknown(), persistent: z.boolean() }).strict();

/** A data map as accepted on the wire; the values' meanings are resolved by `resolveDataMap`. */
export const dataMapSchema = z.record(z.string().min(1).max(200), z.unknown()).superRefine((data, ctx) => {
  if ('locale' in data && data.locale !== null && data.locale !== '' && typeof data.locale !== 'string') {
    ctx.addIssue({ code: 'custom', path: ['locale'], message: 'locale must be a string', params: { code: 'invalid_type' } });
  }
});

export type DataMap = z.output<typeof dataMapSchema>;

export interface ResolvedData {
  /** Stored on the contact (merged over existing data). */
  set: Record<string, unknown>;
  /** Removed from the contact. */
  unset: string[];
  /** Every usable value of this request, persistent or not: template variables and event data. */
  values: Record<string, unknown>;
}

/**
 * The data map rules: scalars, arrays and plain objects are stored; `null` deletes the key; `''` is
 * ignored; `{ value, persistent: false }` is used for this request only; reserved keys are dropped.
 */
export function resolveDataMap(data: DataMap | undefined): ResolvedData {
  const out: ResolvedData = { set: {}, unset: [], values: {} };
  for (const [key, raw] of Object.entries(data ?? {})) {
    if (RESERVED_DATA_KEYS.has(key) || raw === '' || raw === undefined) continue;
    if (raw === null) {
      out.unset.push(key);
      continue;
    }
    const wrapped = transientValue.safeParse(raw);
    if (wrapped.success) {
      const value = wrapped.data.value;
      if (value === '' || value === undefined) continue;
      if (value === null) {
        if (wrapped.data.persistent) out.unset.push(key);
        continue;
      }
      out.values[key] = value;
      if (wrapped.data.persistent) out.set[key] = value;
      continue;
    }
    out.set[key] = raw;
    out.values[key] = raw;
  }
  return out;
}

/** Applies a resolved map to existing contact data. */
export function applyData(current: Record<string, unknown>, resolved: Pick<ResolvedData, 'set' | 'unset'>) {
  const next: Record<string, unknown> = { ...current, ...resolved.set };
  for (const key of resolved.unset) delete next[key];
  return next;
}
