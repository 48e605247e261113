import { z } from 'zod';

/**
 * Response shapes several modules answer with, for `endpoint({ responses })`. Responses are not
 * validated at run time; a schema that mirrors a DTO function is pinned to it at compile time with
 * `sameShape<z.output<typeof schema>, Dto>(true)`, which fails to compile when the two differ.
 */

/** Compiles only when `A` and `B` are the same type (each assignable to the other). */
export function sameShape<A, B>(_: [A] extends [B] ? ([B] extends [A] ? true : never) : never): void {}

/** An ISO 8601 timestamp as responses write it (`Date#toISOString`). */
export const dateTime = z.string().meta({ format: 'date-time' });

/** `{ id, deleted: true }`, the answer of every DELETE of one resource. */
export const deletedResponse = z.object({ id: z.string(), deleted: z.literal(true) });

/** `{ success: true }`, for actions with nothing else to say. */
export const okResponse = z.object({ success: z.literal(true) });

/** `{ success: true, data }`, the envelope of the public endpoints and campaign actions. */
export const successEnvelope = <T extends z.ZodType>(data: T) => z.object({ success: z.literal(true), data });

/** Offset pagination: `{ data, total, page, pageSize, totalPages }`. */
export const offsetList = <T extends z.ZodType>(item: T) =>
  z.object({ data: z.array(item), total: z.number().int(), page: z.number().int(), pageSize: z.number().int(), totalPages: z.number().int() });

/** Cursor pagination: pass `cursor` back until `hasMore` is false; `total` is filled on the first page only. */
export const cursorList = <T extends z.ZodType>(item: T) =>
  z.object({
    data: z.array(item),
    cursor: z.string().meta({ description: 'The id of the page’s last item; empty on an empty page' }),
    hasMore: z.boolean(),
    total: z.number().int(),
  });
