/**
 * Column shapes many entities share, written as the migrations made them, so MikroORM's schema diff
 * against the entities stays empty (test/integration/schema.test.ts).
 */

/**
 * `timestamptz NOT NULL DEFAULT now()`. Entities leave it unset on insert (`createdAt!: Date`): PostgreSQL's
 * now() sets it, to the microsecond and on one clock for every process, and the INSERT reads it back, so
 * lists ordered by it keep the order rows were written in.
 */
export const timestampColumn = { type: 'Date', columnType: 'timestamptz', defaultRaw: 'now()' } as const;

/** A nullable `timestamptz`. */
export const optionalTimestampColumn = { type: 'Date', columnType: 'timestamptz', nullable: true } as const;

/**
 * `<column> uuid REFERENCES <entity>(id) ON DELETE CASCADE` under PostgreSQL's own constraint name; the
 * property holds the id itself, so services read and write ids without loading the entity.
 */
export const cascadingReference = (table: string, column: string, entity: string, extra: { primary?: boolean } = {}) =>
  ({
    kind: 'm:1',
    entity,
    mapToPk: true,
    fieldName: column,
    foreignKeyName: `${table}_${column}_fkey`,
    deleteRule: 'cascade',
    updateRule: 'no action',
    ...extra,
  }) as const;
