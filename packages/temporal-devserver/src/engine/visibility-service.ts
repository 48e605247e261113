/**
 * ListWorkflowExecutions / CountWorkflowExecutions: the query is parsed against the namespace's
 * search attributes, then evaluated over runs in memory (memory mode) or compiled to SQL by the
 * store (durable mode, where closed runs live only in PostgreSQL).
 */
import { temporal } from '../proto';
import { invalidArgument } from '../rpc/errors';
import { type AttributeResolver, type Expr, parseVisibilityQuery, STATUS_BY_NAME, type VisibilityQuery } from '../visibility/query';
import { evaluate, rowComparator, type VisibilityRow } from '../visibility/row';
import { executionInfo, visibilityRow } from './describe';
import type { Engine } from './engine';
import { type NamespaceRecord, SYSTEM_SEARCH_ATTRIBUTES } from './namespaces';
import type { ExecutionRecord } from './state';

const MAX_PAGE = 1000;

/** The search attributes a query may name in `ns`: the system ones and the namespace's own. */
export function attributeResolver(ns: NamespaceRecord, extra: Record<string, number> = {}): AttributeResolver {
  return (name) => {
    const system = SYSTEM_SEARCH_ATTRIBUTES[name] ?? extra[name];
    if (system !== undefined) return { type: system, system: true };
    const custom = ns.searchAttributes[name];
    return custom !== undefined ? { type: custom, system: false } : undefined;
  };
}

/** Whether a query asks for the TemporalScheduler division (the Web UI counts schedules so). */
function asksForSchedules(expr: Expr | undefined): boolean {
  if (!expr) return false;
  if (expr.kind === 'and') return expr.items.some(asksForSchedules);
  return expr.kind === 'cmp' && expr.field.name === 'TemporalNamespaceDivision' && expr.op === '=' && expr.value === 'TemporalScheduler';
}

export class VisibilityService {
  /** Schedules as visibility rows, for counts in the TemporalScheduler division (set by the server). */
  scheduleRows: (namespace: string) => VisibilityRow[] = () => [];

  constructor(private readonly engine: Engine) {}

  private parse(namespace: string, query: string | null | undefined): VisibilityQuery {
    return parseVisibilityQuery(query, attributeResolver(this.engine.namespaces.get(namespace)));
  }

  /** Matching records of runs in memory, in query order. */
  private inMemory(namespace: string, query: VisibilityQuery): ExecutionRecord[] {
    const rows = [];
    for (const exec of this.engine.executions.values()) {
      if (exec.s.namespace !== namespace) continue;
      const row = visibilityRow(exec.s, exec.searchAttributeValues);
      if (!query.where || evaluate(query.where, row)) rows.push({ row, record: exec.s });
    }
    const cmp = rowComparator(query);
    rows.sort((a, b) => cmp(a.row, b.row));
    return rows.map((r) => r.record);
  }

  async list(req: temporal.api.workflowservice.v1.IListWorkflowExecutionsRequest): Promise<object> {
    const query = this.parse(req.namespace ?? '', req.query);
    if (query.groupBy) throw invalidArgument(`invalid query "${req.query}": GROUP BY is only allowed in a count`);
    const pageSize = Math.min(MAX_PAGE, req.pageSize && req.pageSize > 0 ? req.pageSize : 100);
    let offset = 0;
    if (req.nextPageToken?.length) {
      offset = Number(Buffer.from(req.nextPageToken).toString());
      if (!Number.isInteger(offset) || offset < 0) throw invalidArgument('invalid next page token');
    }
    let records: ExecutionRecord[];
    let more: boolean;
    if (this.engine.store) {
      const page = await this.engine.store.list(req.namespace!, query, offset, pageSize);
      records = page.records;
      more = page.nextOffset !== undefined;
    } else {
      const all = this.inMemory(req.namespace!, query);
      records = all.slice(offset, offset + pageSize);
      more = offset + pageSize < all.length;
    }
    return {
      executions: records.map(executionInfo),
      nextPageToken: more ? Buffer.from(String(offset + pageSize)) : undefined,
    };
  }

  async count(req: temporal.api.workflowservice.v1.ICountWorkflowExecutionsRequest): Promise<object> {
    const query = this.parse(req.namespace ?? '', req.query);
    if (query.groupBy) return this.countByStatus(req.namespace!, query);
    // Temporal's schedules are system workflows in that division; here they are counted from the scheduler.
    if (asksForSchedules(query.where)) return { count: this.scheduleRows(req.namespace!).filter((row) => evaluate(query.where!, row)).length, groups: [] };
    const count = this.engine.store ? await this.engine.store.count(req.namespace!, query) : this.inMemory(req.namespace!, query).length;
    return { count, groups: [] };
  }

  /** `… GROUP BY ExecutionStatus`: one group per status present, its value a JSON payload of the status name ("Running"). */
  private async countByStatus(namespace: string, query: VisibilityQuery): Promise<object> {
    let byStatus: Map<number, number>;
    if (this.engine.store) {
      byStatus = await this.engine.store.countByStatus(namespace, query);
    } else {
      byStatus = new Map();
      for (const record of this.inMemory(namespace, query)) byStatus.set(record.status, (byStatus.get(record.status) ?? 0) + 1);
    }
    const groups = [...byStatus]
      .sort(([a], [b]) => a - b)
      .map(([status, count]) => ({ groupValues: [jsonPayload(STATUS_NAMES[status] ?? String(status))], count }));
    return { count: groups.reduce((sum, g) => sum + g.count, 0), groups };
  }
}

const STATUS_NAMES: Record<number, string> = Object.fromEntries(Object.entries(STATUS_BY_NAME).map(([name, value]) => [value, name]));

function jsonPayload(value: string) {
  return { metadata: { encoding: Buffer.from('json/plain') }, data: Buffer.from(JSON.stringify(value)) };
}
