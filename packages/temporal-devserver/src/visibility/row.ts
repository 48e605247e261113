/**
 * The visibility view of a run: the columns queries can filter and sort on. Both the in-memory
 * evaluator and the PostgreSQL store speak in these names.
 */
import { enums } from '../proto';
import type { Expr, Field, Value, VisibilityQuery } from './query';

const IVT = enums.IndexedValueType;

export interface VisibilityRow {
  namespace: string;
  workflowId: string;
  runId: string;
  workflowType: string;
  taskQueue: string;
  status: number;
  startTime: number;
  executionTime: number;
  closeTime?: number;
  historyLength: number;
  historySizeBytes: number;
  stateTransitions: number;
  parentWorkflowId?: string;
  parentRunId?: string;
  rootWorkflowId?: string;
  rootRunId?: string;
  /** Custom (and upserted system) attributes, JSON-decoded. */
  searchAttributes: Record<string, unknown>;
}

/** The value a query compares for `field` on `row` (datetimes as ms, lists as arrays). */
export function fieldValue(row: VisibilityRow, field: Field): unknown {
  switch (field.name) {
    case 'WorkflowId':
      return row.workflowId;
    case 'RunId':
      return row.runId;
    case 'WorkflowType':
      return row.workflowType;
    case 'ExecutionStatus':
      return row.status;
    case 'StartTime':
      return row.startTime;
    case 'ExecutionTime':
      return row.executionTime;
    case 'CloseTime':
      return row.closeTime;
    case 'ExecutionDuration':
      return row.closeTime !== undefined ? (row.closeTime - row.executionTime) * 1e6 : undefined;
    case 'HistoryLength':
      return row.historyLength;
    case 'HistorySizeBytes':
      return row.historySizeBytes;
    case 'StateTransitionCount':
      return row.stateTransitions;
    case 'TaskQueue':
      return row.taskQueue;
    case 'ParentWorkflowId':
      return row.parentWorkflowId;
    case 'ParentRunId':
      return row.parentRunId;
    case 'RootWorkflowId':
      return row.rootWorkflowId;
    case 'RootRunId':
      return row.rootRunId;
    default: {
      const v = row.searchAttributes[field.name];
      if (v === undefined || v === null) return undefined;
      if (field.type === IVT.INDEXED_VALUE_TYPE_DATETIME) return typeof v === 'string' ? Date.parse(v) : undefined;
      return v;
    }
  }
}

function compare(a: unknown, b: Value): number {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  const sa = String(a);
  const sb = String(b);
  return sa < sb ? -1 : sa > sb ? 1 : 0;
}

function matchesScalar(v: unknown, test: (x: unknown) => boolean): boolean {
  // A keyword list matches when any of its items does, as in Temporal.
  return Array.isArray(v) ? v.some(test) : test(v);
}

export function evaluate(expr: Expr, row: VisibilityRow): boolean {
  switch (expr.kind) {
    case 'and':
      return expr.items.every((e) => evaluate(e, row));
    case 'or':
      return expr.items.some((e) => evaluate(e, row));
    case 'not':
      return !evaluate(expr.expr, row);
    case 'null': {
      const v = fieldValue(row, expr.field);
      const isNull = v === undefined || (Array.isArray(v) && v.length === 0);
      return expr.negate ? !isNull : isNull;
    }
    case 'cmp': {
      const v = fieldValue(row, expr.field);
      if (v === undefined) return expr.op === '!=';
      if (expr.op === '!=') return !matchesScalar(v, (x) => compare(x, expr.value) === 0);
      return matchesScalar(v, (x) => {
        const c = compare(x, expr.value);
        switch (expr.op) {
          case '=':
            return c === 0;
          case '<':
            return c < 0;
          case '<=':
            return c <= 0;
          case '>':
            return c > 0;
          default:
            return c >= 0;
        }
      });
    }
    case 'in': {
      const v = fieldValue(row, expr.field);
      const hit = v !== undefined && matchesScalar(v, (x) => expr.values.some((val) => compare(x, val) === 0));
      return expr.negate ? !hit : hit;
    }
    case 'between': {
      const v = fieldValue(row, expr.field);
      return v !== undefined && matchesScalar(v, (x) => compare(x, expr.low) >= 0 && compare(x, expr.high) <= 0);
    }
    case 'startsWith': {
      const v = fieldValue(row, expr.field);
      return v !== undefined && matchesScalar(v, (x) => String(x).startsWith(expr.value));
    }
  }
}

/** Default order: newest start first, then run id, as Temporal's SQL visibility does. */
export function rowComparator(query: VisibilityQuery): (a: VisibilityRow, b: VisibilityRow) => number {
  const order = query.orderBy.length ? query.orderBy : [{ field: { name: 'StartTime', type: IVT.INDEXED_VALUE_TYPE_DATETIME, system: true }, desc: true }];
  return (a, b) => {
    for (const { field, desc } of order) {
      const va = fieldValue(a, field);
      const vb = fieldValue(b, field);
      if (va === vb) continue;
      if (va === undefined) return 1;
      if (vb === undefined) return -1;
      const c = compare(va, vb as Value);
      if (c !== 0) return desc ? -c : c;
    }
    return a.runId < b.runId ? -1 : a.runId > b.runId ? 1 : 0;
  };
}
