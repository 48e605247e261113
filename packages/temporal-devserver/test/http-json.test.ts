/** proto3 canonical JSON of the HTTP API: the well-known types and scalars protobufjs leaves to us. */
import Long from 'long';
import { messageFromJson, messageToJson, queryToJson } from '../src/http/json';
import { root } from '../src/proto';

const type = (name: string) => root.lookupType(name);

test('Timestamp and Duration use RFC 3339 and "Ns" with 0, 3, 6 or 9 fractional digits', () => {
  const ts = type('google.protobuf.Timestamp');
  expect(messageToJson(ts, { seconds: Long.fromNumber(1767322445), nanos: 0 })).toBe('2026-01-02T02:54:05Z');
  expect(messageToJson(ts, { seconds: 1767322445, nanos: 120_000_000 })).toBe('2026-01-02T02:54:05.120Z');
  expect(messageToJson(ts, { seconds: 1767322445, nanos: 1_500 })).toBe('2026-01-02T02:54:05.000001500Z');
  expect(messageFromJson(ts, '2026-01-02T02:54:05.12Z')).toEqual({ seconds: Long.fromNumber(1767322445), nanos: 120_000_000 });
  expect(() => messageFromJson(ts, 'yesterday')).toThrow(/RFC 3339/);

  const dur = type('google.protobuf.Duration');
  expect(messageToJson(dur, { seconds: 10, nanos: 0 })).toBe('10s');
  expect(messageToJson(dur, { seconds: 1, nanos: 500_000_000 })).toBe('1.500s');
  expect(messageFromJson(dur, '1.5s')).toEqual({ seconds: Long.fromNumber(1), nanos: 500_000_000 });
  expect(() => messageFromJson(dur, '10m')).toThrow(/duration/);
});

test('int64 as strings, enums by name, bytes as base64, defaults omitted', () => {
  const info = type('temporal.api.workflow.v1.WorkflowExecutionInfo');
  const json = messageToJson(info, info.decode(info.encode({ historyLength: 42, status: 1, stateTransitionCount: 0 }).finish()) as never);
  expect(json).toEqual({ historyLength: '42', status: 'WORKFLOW_EXECUTION_STATUS_RUNNING' });
  const payload = type('temporal.api.common.v1.Payload');
  expect(messageToJson(payload, { metadata: { encoding: Buffer.from('json/plain') }, data: Buffer.from('1') })).toEqual({
    metadata: { encoding: 'anNvbi9wbGFpbg==' },
    data: 'MQ==',
  });
});

test('input accepts proto names, numeric enums and query-string values; rejects the unknown', () => {
  const req = type('temporal.api.workflowservice.v1.ListWorkflowExecutionsRequest');
  const json = {};
  queryToJson(req, new URLSearchParams('page_size=20&query=a%3D1&nextPageToken=MTA%3D'), json);
  expect(messageFromJson(req, json)).toEqual({ pageSize: 20, query: 'a=1', nextPageToken: Buffer.from('10') });
  expect(() => messageFromJson(req, { pageSize: 'twenty' })).toThrow(/pageSize/);
  expect(() => queryToJson(req, new URLSearchParams('colour=red'), {})).toThrow(/colour/);

  const hist = type('temporal.api.workflowservice.v1.GetWorkflowExecutionHistoryRequest');
  const h = {};
  queryToJson(hist, new URLSearchParams('waitNewEvent=true&historyEventFilterType=2&execution.runId=r1'), h);
  expect(messageFromJson(hist, h)).toEqual({ waitNewEvent: true, historyEventFilterType: 2, execution: { runId: 'r1' } });
  expect(messageFromJson(hist, { historyEventFilterType: 'HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT' })).toEqual({ historyEventFilterType: 2 });
  expect(() => messageFromJson(hist, { historyEventFilterType: 'SOMETIMES' })).toThrow(/HistoryEventFilterType/);
});
