/**
 * Namespaces and their search-attribute schemas. Temporal's dev server pre-registers `default` and
 * a few Custom* attributes; we do the same, and keep what is registered later in the store.
 */
import crypto from 'node:crypto';
import { enums, type IPayload } from '../proto';
import { invalidArgument, namespaceAlreadyExists, namespaceNotFound } from '../rpc/errors';

const IVT = enums.IndexedValueType;

export const DEFAULT_RETENTION_MS = 24 * 60 * 60 * 1000;

export interface NamespaceRecord {
  name: string;
  id: string;
  description: string;
  ownerEmail: string;
  data: Record<string, string>;
  retentionMs: number;
  /** Custom search attributes: name -> IndexedValueType. */
  searchAttributes: Record<string, number>;
}

/** Attributes every namespace has; queries and upserts may use them without registering. */
export const SYSTEM_SEARCH_ATTRIBUTES: Record<string, number> = {
  WorkflowId: IVT.INDEXED_VALUE_TYPE_KEYWORD,
  RunId: IVT.INDEXED_VALUE_TYPE_KEYWORD,
  WorkflowType: IVT.INDEXED_VALUE_TYPE_KEYWORD,
  ExecutionStatus: IVT.INDEXED_VALUE_TYPE_KEYWORD,
  StartTime: IVT.INDEXED_VALUE_TYPE_DATETIME,
  CloseTime: IVT.INDEXED_VALUE_TYPE_DATETIME,
  ExecutionTime: IVT.INDEXED_VALUE_TYPE_DATETIME,
  ExecutionDuration: IVT.INDEXED_VALUE_TYPE_INT,
  HistoryLength: IVT.INDEXED_VALUE_TYPE_INT,
  HistorySizeBytes: IVT.INDEXED_VALUE_TYPE_INT,
  StateTransitionCount: IVT.INDEXED_VALUE_TYPE_INT,
  TaskQueue: IVT.INDEXED_VALUE_TYPE_KEYWORD,
  ParentWorkflowId: IVT.INDEXED_VALUE_TYPE_KEYWORD,
  ParentRunId: IVT.INDEXED_VALUE_TYPE_KEYWORD,
  RootWorkflowId: IVT.INDEXED_VALUE_TYPE_KEYWORD,
  RootRunId: IVT.INDEXED_VALUE_TYPE_KEYWORD,
  TemporalChangeVersion: IVT.INDEXED_VALUE_TYPE_KEYWORD_LIST,
  BinaryChecksums: IVT.INDEXED_VALUE_TYPE_KEYWORD_LIST,
  BuildIds: IVT.INDEXED_VALUE_TYPE_KEYWORD_LIST,
  BatcherNamespace: IVT.INDEXED_VALUE_TYPE_KEYWORD,
  BatcherUser: IVT.INDEXED_VALUE_TYPE_KEYWORD,
  TemporalScheduledStartTime: IVT.INDEXED_VALUE_TYPE_DATETIME,
  TemporalScheduledById: IVT.INDEXED_VALUE_TYPE_KEYWORD,
  TemporalSchedulePaused: IVT.INDEXED_VALUE_TYPE_BOOL,
  TemporalNamespaceDivision: IVT.INDEXED_VALUE_TYPE_KEYWORD,
  TemporalPauseInfo: IVT.INDEXED_VALUE_TYPE_KEYWORD_LIST,
  TemporalReportedProblems: IVT.INDEXED_VALUE_TYPE_KEYWORD_LIST,
  TemporalWorkerDeploymentVersion: IVT.INDEXED_VALUE_TYPE_KEYWORD,
  TemporalWorkerDeployment: IVT.INDEXED_VALUE_TYPE_KEYWORD,
  TemporalWorkflowVersioningBehavior: IVT.INDEXED_VALUE_TYPE_KEYWORD,
};

/** What `temporal server start-dev` registers in every namespace. */
const DEV_SERVER_CUSTOM_ATTRIBUTES: Record<string, number> = {
  CustomKeywordField: IVT.INDEXED_VALUE_TYPE_KEYWORD,
  CustomStringField: IVT.INDEXED_VALUE_TYPE_TEXT,
  CustomTextField: IVT.INDEXED_VALUE_TYPE_TEXT,
  CustomIntField: IVT.INDEXED_VALUE_TYPE_INT,
  CustomDatetimeField: IVT.INDEXED_VALUE_TYPE_DATETIME,
  CustomDoubleField: IVT.INDEXED_VALUE_TYPE_DOUBLE,
  CustomBoolField: IVT.INDEXED_VALUE_TYPE_BOOL,
};

const TYPE_NAMES: Record<number, string> = {
  [IVT.INDEXED_VALUE_TYPE_TEXT]: 'Text',
  [IVT.INDEXED_VALUE_TYPE_KEYWORD]: 'Keyword',
  [IVT.INDEXED_VALUE_TYPE_INT]: 'Int',
  [IVT.INDEXED_VALUE_TYPE_DOUBLE]: 'Double',
  [IVT.INDEXED_VALUE_TYPE_BOOL]: 'Bool',
  [IVT.INDEXED_VALUE_TYPE_DATETIME]: 'Datetime',
  [IVT.INDEXED_VALUE_TYPE_KEYWORD_LIST]: 'KeywordList',
};

export function newNamespace(name: string, retentionMs = DEFAULT_RETENTION_MS): NamespaceRecord {
  return {
    name,
    id: crypto.randomUUID(),
    description: '',
    ownerEmail: '',
    data: {},
    retentionMs,
    searchAttributes: { ...DEV_SERVER_CUSTOM_ATTRIBUTES },
  };
}

export class NamespaceRegistry {
  private readonly byName = new Map<string, NamespaceRecord>();

  constructor(records: NamespaceRecord[]) {
    for (const r of records) this.byName.set(r.name, r);
  }

  list(): NamespaceRecord[] {
    return [...this.byName.values()];
  }

  has(name: string): boolean {
    return this.byName.has(name);
  }

  /** The namespace or NOT_FOUND with the detail the SDK turns into NamespaceNotFoundError. */
  get(name: string | null | undefined): NamespaceRecord {
    const ns = this.byName.get(name || '');
    if (!ns) throw namespaceNotFound(name || '');
    return ns;
  }

  register(record: NamespaceRecord): void {
    if (this.byName.has(record.name)) throw namespaceAlreadyExists(record.name);
    this.byName.set(record.name, record);
  }

  /** Type of a search attribute usable in `namespace`, or undefined if unknown. */
  attributeType(ns: NamespaceRecord, name: string): number | undefined {
    return SYSTEM_SEARCH_ATTRIBUTES[name] ?? ns.searchAttributes[name];
  }

  /** Adding an attribute that exists with the same type is a no-op, as on a real server. */
  addSearchAttributes(ns: NamespaceRecord, attrs: Record<string, number>): void {
    for (const [name, type] of Object.entries(attrs)) {
      if (SYSTEM_SEARCH_ATTRIBUTES[name] !== undefined) {
        throw invalidArgument(`Search attribute ${name} is reserved by system.`);
      }
      const existing = ns.searchAttributes[name];
      if (existing !== undefined && existing !== type) {
        throw invalidArgument(`Search attribute ${name} already exists with a different type.`);
      }
    }
    for (const [name, type] of Object.entries(attrs)) ns.searchAttributes[name] = type;
  }

  removeSearchAttributes(ns: NamespaceRecord, names: string[]): void {
    for (const name of names) {
      if (ns.searchAttributes[name] === undefined) throw invalidArgument(`Search attribute ${name} doesn't exist.`);
    }
    for (const name of names) delete ns.searchAttributes[name];
  }

  /**
   * Search attribute payloads with their registered type in the `type` metadata, as the real
   * server stores them: SDKs decode typed search attributes only from payloads that carry it.
   */
  withTypes(ns: NamespaceRecord, fields: Record<string, IPayload> | null | undefined): Record<string, IPayload> | undefined {
    if (!fields) return undefined;
    const out: Record<string, IPayload> = {};
    for (const [name, payload] of Object.entries(fields)) {
      const type = this.attributeType(ns, name);
      const metadata = { ...(payload.metadata ?? {}) };
      if (type !== undefined && !metadata.type) metadata.type = Buffer.from(TYPE_NAMES[type] ?? 'Keyword');
      out[name] = { ...payload, metadata };
    }
    return out;
  }

  /** Rejects upserts and starts naming attributes the namespace does not know, like the real server. */
  validateSearchAttributes(ns: NamespaceRecord, names: string[]): void {
    for (const name of names) {
      if (this.attributeType(ns, name) === undefined) {
        throw invalidArgument(`search attribute ${name} is not defined`);
      }
    }
  }
}
