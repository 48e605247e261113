/**
 * The visibility query language on its own: what parses, what is rejected, and that the in-memory
 * evaluator and the SQL compiler read the same tree.
 */
import { temporal } from '@temporalio/proto';
import { parseVisibilityQuery, type AttributeResolver } from '../src/visibility/query';
import { evaluate, type VisibilityRow } from '../src/visibility/row';
import { compileVisibilityQuery, SqlParams } from '../src/visibility/sql';
import { SYSTEM_SEARCH_ATTRIBUTES } from '../src/engine/namespaces';

const IVT = temporal.api.enums.v1.IndexedValueType;
const custom: Record<string, number> = { ProjectId: IVT.INDEXED_VALUE_TYPE_KEYWORD, Attempts: IVT.INDEXED_VALUE_TYPE_INT };
const resolve: AttributeResolver = (name) =>
  SYSTEM_SEARCH_ATTRIBUTES[name] !== undefined
    ? { type: SYSTEM_SEARCH_ATTRIBUTES[name], system: true }
    : custom[name] !== undefined
      ? { type: custom[name], system: false }
      : undefined;

const row = (over: Partial<VisibilityRow> = {}): VisibilityRow => ({
  namespace: 'default',
  workflowId: 'campaign/42',
  runId: 'r1',
  workflowType: 'campaignSendWorkflow',
  taskQueue: 'q',
  status: temporal.api.enums.v1.WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING,
  startTime: Date.parse('2026-01-02T03:04:05Z'),
  executionTime: Date.parse('2026-01-02T03:04:05Z'),
  historyLength: 10,
  historySizeBytes: 1000,
  stateTransitions: 5,
  searchAttributes: { ProjectId: ['p1'], Attempts: 3 },
  ...over,
});

const matches = (q: string, r = row()) => evaluate(parseVisibilityQuery(q, resolve).where!, r);

test('comparisons, IN, AND/OR/NOT and parentheses', () => {
  expect(matches(`WorkflowType = 'campaignSendWorkflow' AND ExecutionStatus = 'Running'`)).toBe(true);
  expect(matches(`ProjectId = 'p1'`)).toBe(true);
  expect(matches(`ProjectId IN ('p2', "p1")`)).toBe(true);
  expect(matches(`ProjectId NOT IN ('p1')`)).toBe(false);
  expect(matches(`(ProjectId = 'p2' OR Attempts >= 3) AND NOT ExecutionStatus = 'Completed'`)).toBe(true);
  expect(matches(`Attempts BETWEEN 1 AND 2`)).toBe(false);
  expect(matches(`WorkflowId STARTS_WITH 'campaign/'`)).toBe(true);
  expect(matches(`StartTime > '2026-01-01T00:00:00Z' AND CloseTime IS NULL`)).toBe(true);
  expect(matches(`WorkflowId = 'it''s'`, row({ workflowId: "it's" }))).toBe(true);
});

test('ORDER BY and unknown names', () => {
  const q = parseVisibilityQuery(`ProjectId = 'p1' ORDER BY StartTime ASC, WorkflowId DESC`, resolve);
  expect(q.orderBy.map((o) => [o.field.name, o.desc])).toEqual([
    ['StartTime', false],
    ['WorkflowId', true],
  ]);
  expect(() => parseVisibilityQuery(`Nope = 'x'`, resolve)).toThrow(/not defined/);
  expect(() => parseVisibilityQuery(`ExecutionStatus = 'Sleeping'`, resolve)).toThrow(/ExecutionStatus/);
  expect(() => parseVisibilityQuery(`ProjectId = 'unterminated`, resolve)).toThrow(/unterminated/);
  expect(() => parseVisibilityQuery(`ProjectId = 'a' garbage`, resolve)).toThrow();
});

test('SQL never embeds names or values: everything is a parameter', () => {
  const p = new SqlParams();
  const { where, orderBy } = compileVisibilityQuery(parseVisibilityQuery(`ProjectId = 'x'' OR 1=1 --' AND Attempts > 2 ORDER BY StartTime DESC`, resolve), p);
  expect(where).not.toContain('1=1');
  expect(where).not.toContain('ProjectId');
  expect(p.values).toEqual(['ProjectId', "x' OR 1=1 --", 'Attempts', 2]);
  expect(orderBy).toBe('start_time DESC NULLS LAST, run_id');
});

test('GROUP BY ExecutionStatus parses; other groupings and ORDER BY with it are rejected', () => {
  const q = parseVisibilityQuery(`ProjectId = 'p1' GROUP BY ExecutionStatus`, resolve);
  expect(q.groupBy?.name).toBe('ExecutionStatus');
  expect(evaluate(q.where!, row())).toBe(true);
  expect(parseVisibilityQuery('GROUP BY ExecutionStatus', resolve)).toMatchObject({ where: undefined, groupBy: { name: 'ExecutionStatus' } });
  expect(() => parseVisibilityQuery('GROUP BY WorkflowType', resolve)).toThrow(/only ExecutionStatus/);
  expect(() => parseVisibilityQuery('GROUP BY ExecutionStatus ORDER BY StartTime', resolve)).toThrow(/ORDER BY/);
});
