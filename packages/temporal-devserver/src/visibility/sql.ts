/**
 * Compiles a parsed visibility query to one parameterised PostgreSQL condition over the
 * `executions` table. Attribute names never become identifiers: system attributes map to fixed
 * columns, custom ones are read from the `search_attributes` jsonb column with the name as a
 * parameter.
 */
import { enums } from '../proto';
import type { Expr, Field, Value, VisibilityQuery } from './query';

const IVT = enums.IndexedValueType;

const COLUMNS: Record<string, string> = {
  WorkflowId: 'workflow_id',
  RunId: 'run_id',
  WorkflowType: 'workflow_type',
  ExecutionStatus: 'status',
  StartTime: 'start_time',
  ExecutionTime: 'execution_time',
  CloseTime: 'close_time',
  ExecutionDuration: '((close_time - execution_time) * 1000000)',
  HistoryLength: 'history_length',
  HistorySizeBytes: 'history_size_bytes',
  StateTransitionCount: 'state_transitions',
  TaskQueue: 'task_queue',
  ParentWorkflowId: 'parent_workflow_id',
  ParentRunId: 'parent_run_id',
  RootWorkflowId: 'root_workflow_id',
  RootRunId: 'root_run_id',
};

export class SqlParams {
  readonly values: unknown[] = [];

  add(v: unknown): string {
    this.values.push(v);
    return `$${this.values.length}`;
  }
}

/**
 * Keyword attributes in jsonb: SDKs send them as a string or as a list of strings, and the jsonb
 * `?` operators match both shapes, so equality and IN use those.
 */
function isKeywordLike(field: Field): boolean {
  return (field.type === IVT.INDEXED_VALUE_TYPE_KEYWORD_LIST || field.type === IVT.INDEXED_VALUE_TYPE_KEYWORD) && !COLUMNS[field.name];
}

/** SQL expression of a scalar attribute, typed for comparison. */
function scalar(field: Field, p: SqlParams): string {
  const column = COLUMNS[field.name];
  if (column) return column;
  const text = `(search_attributes->>${p.add(field.name)})`;
  switch (field.type) {
    case IVT.INDEXED_VALUE_TYPE_INT:
      return `${text}::bigint`;
    case IVT.INDEXED_VALUE_TYPE_DOUBLE:
      return `${text}::double precision`;
    case IVT.INDEXED_VALUE_TYPE_BOOL:
      return `${text}::boolean`;
    case IVT.INDEXED_VALUE_TYPE_DATETIME:
      return `(extract(epoch from ${text}::timestamptz) * 1000)`;
    default:
      return text;
  }
}

function compileExpr(e: Expr, p: SqlParams): string {
  switch (e.kind) {
    case 'and':
      return `(${e.items.map((i) => compileExpr(i, p)).join(' AND ')})`;
    case 'or':
      return `(${e.items.map((i) => compileExpr(i, p)).join(' OR ')})`;
    case 'not':
      return `(NOT ${compileExpr(e.expr, p)})`;
    case 'null': {
      const sql = isKeywordLike(e.field)
        ? `(search_attributes->${p.add(e.field.name)} IS NULL OR search_attributes->${p.add(e.field.name)} = '[]'::jsonb)`
        : `(${scalar(e.field, p)} IS NULL)`;
      return e.negate ? `(NOT ${sql})` : sql;
    }
    case 'cmp': {
      if (isKeywordLike(e.field)) {
        const contains = `(search_attributes->${p.add(e.field.name)} ? ${p.add(String(e.value))})`;
        if (e.op === '=') return contains;
        if (e.op === '!=') return `(search_attributes ? ${p.add(e.field.name)} AND NOT ${contains})`;
      }
      return `(${scalar(e.field, p)} ${e.op === '!=' ? '<>' : e.op} ${p.add(e.value)})`;
    }
    case 'in': {
      if (isKeywordLike(e.field)) {
        const any = `(search_attributes->${p.add(e.field.name)} ?| ${p.add(e.values.map(String))}::text[])`;
        return e.negate ? `(search_attributes ? ${p.add(e.field.name)} AND NOT ${any})` : any;
      }
      const list = e.values.map((v: Value) => p.add(v)).join(', ');
      return `(${scalar(e.field, p)} ${e.negate ? 'NOT IN' : 'IN'} (${list}))`;
    }
    case 'between':
      return `(${scalar(e.field, p)} BETWEEN ${p.add(e.low)} AND ${p.add(e.high)})`;
    case 'startsWith':
      return `(starts_with(${scalar(e.field, p)}, ${p.add(e.value)}))`;
  }
}

/** `WHERE ... ORDER BY ...` tail for `query`, after the caller's own conditions. */
export function compileVisibilityQuery(query: VisibilityQuery, p: SqlParams): { where: string; orderBy: string } {
  const where = query.where ? compileExpr(query.where, p) : 'TRUE';
  const order = query.orderBy.length ? query.orderBy.map((o) => `${scalar(o.field, p)} ${o.desc ? 'DESC' : 'ASC'} NULLS LAST`) : ['start_time DESC'];
  return { where, orderBy: [...order, 'run_id'].join(', ') };
}
