/**
 * Durable store in PostgreSQL, in a schema of its own (default `temporal_dev`) that the dev
 * server creates and versions itself.
 *
 * Writes go through one connection as group commits: while a transaction is in flight, later
 * batches queue up and are written together in the next one. Batches therefore become durable in
 * order, and throughput does not depend on one round trip per operation.
 */
import pg from 'pg';
import type { Logger } from 'pino';
import { encodeHistoryBody, splitHistoryBody } from '../proto';
import type { NamespaceRecord } from '../engine/namespaces';
import type { ExecutionRecord } from '../engine/state';
import type { VisibilityQuery } from '../visibility/query';
import { compileVisibilityQuery, SqlParams } from '../visibility/sql';
import type { CommitBatch, CurrentRunInfo, ListPage, PersistedExecution, Store } from './store';

/** Each entry upgrades the schema by one version; entries are never edited once released. */
const MIGRATIONS: string[] = [
  `
  CREATE TABLE namespaces (
    name text PRIMARY KEY,
    data jsonb NOT NULL
  );
  CREATE TABLE executions (
    namespace text NOT NULL,
    run_id text NOT NULL,
    workflow_id text NOT NULL,
    workflow_type text NOT NULL,
    task_queue text NOT NULL,
    status int NOT NULL,
    start_time bigint NOT NULL,
    execution_time bigint NOT NULL,
    close_time bigint,
    history_length bigint NOT NULL,
    history_size_bytes bigint NOT NULL,
    state_transitions bigint NOT NULL,
    parent_workflow_id text,
    parent_run_id text,
    root_workflow_id text,
    root_run_id text,
    start_request_id text NOT NULL,
    search_attributes jsonb NOT NULL,
    state text NOT NULL,
    PRIMARY KEY (namespace, run_id)
  );
  CREATE INDEX executions_open ON executions (namespace) WHERE status = 1;
  CREATE INDEX executions_by_start ON executions (namespace, start_time DESC);
  CREATE INDEX executions_by_workflow ON executions (namespace, workflow_id);
  CREATE INDEX executions_by_close ON executions (namespace, close_time) WHERE close_time IS NOT NULL;
  CREATE TABLE history (
    namespace text NOT NULL,
    run_id text NOT NULL,
    first_event_id bigint NOT NULL,
    events bytea NOT NULL,
    PRIMARY KEY (namespace, run_id, first_event_id)
  );
  CREATE TABLE current_runs (
    namespace text NOT NULL,
    workflow_id text NOT NULL,
    run_id text NOT NULL,
    PRIMARY KEY (namespace, workflow_id)
  );
  `,
  `
  CREATE TABLE schedules (
    namespace text NOT NULL,
    schedule_id text NOT NULL,
    state text NOT NULL,
    deleted boolean NOT NULL,
    PRIMARY KEY (namespace, schedule_id)
  );
  `,
];

function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

interface Pending {
  batch: CommitBatch;
  resolve(): void;
}

export class PostgresStore implements Store {
  private readonly queue: Pending[] = [];
  private writing = false;
  private closed = false;

  private constructor(
    private readonly pool: pg.Pool,
    private writer: pg.Client,
    private readonly url: string,
    private readonly schema: string,
    private readonly log: Logger,
  ) {}

  static async open(url: string, schema: string, log: Logger): Promise<PostgresStore> {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(schema)) throw new Error(`invalid schema name ${schema}`);
    const q = quoteIdent(schema);
    const options = `-c search_path=${schema}`;
    const pool = new pg.Pool({ connectionString: url, max: 4, options });
    pool.on('error', (err) => log.warn({ err }, 'idle PostgreSQL connection failed'));
    const writer = new pg.Client({ connectionString: url, options });
    await writer.connect();
    try {
      await PostgresStore.migrate(writer, q);
      await PostgresStore.takeOwnership(writer, schema);
    } catch (err) {
      await writer.end().catch(() => {});
      await pool.end().catch(() => {});
      throw err;
    }
    writer.on('error', (err) => log.warn({ err }, 'PostgreSQL writer connection failed'));
    return new PostgresStore(pool, writer, url, schema, log);
  }

  /**
   * One dev server per schema: two writing the same runs would corrupt them. The lock lives as long
   * as the writer's session; a server killed a moment ago may still hold it, so wait a little.
   */
  private static async takeOwnership(client: pg.Client, schema: string): Promise<void> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const { rows } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock(hashtext($1)) AS ok', [`temporal-devserver-owner:${schema}`]);
      if (rows[0].ok) return;
      if (Date.now() > deadline) throw new Error(`another Temporal dev server is using schema "${schema}" of this database`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  /** Creates or upgrades the schema; an advisory lock keeps two starting servers from racing. */
  private static async migrate(client: pg.Client, q: string): Promise<void> {
    await client.query(`SELECT pg_advisory_lock(hashtext($1))`, [`temporal-devserver:${q}`]);
    try {
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${q}`);
      await client.query(`CREATE TABLE IF NOT EXISTS ${q}.schema_version (version int NOT NULL)`);
      const { rows } = await client.query<{ version: number }>(`SELECT version FROM ${q}.schema_version`);
      let version = rows[0]?.version ?? 0;
      if (!rows.length) await client.query(`INSERT INTO ${q}.schema_version VALUES (0)`);
      if (version > MIGRATIONS.length) throw new Error(`schema ${q} is at version ${version}, newer than this dev server`);
      while (version < MIGRATIONS.length) {
        await client.query('BEGIN');
        await client.query(`SET LOCAL search_path = ${q}`);
        await client.query(MIGRATIONS[version]);
        version++;
        await client.query(`UPDATE ${q}.schema_version SET version = $1`, [version]);
        await client.query('COMMIT');
      }
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      await client.query(`SELECT pg_advisory_unlock(hashtext($1))`, [`temporal-devserver:${q}`]);
    }
  }

  // ------------------------------------------------------------------ writes

  commit(batch: CommitBatch): Promise<void> {
    return new Promise((resolve) => {
      this.queue.push({ batch, resolve });
      void this.drain();
    });
  }

  private async drain(): Promise<void> {
    if (this.writing) return;
    this.writing = true;
    try {
      while (this.queue.length && !this.closed) {
        const group = this.queue.splice(0);
        await this.writeWithRetry(group.map((p) => p.batch));
        for (const p of group) p.resolve();
      }
    } finally {
      this.writing = false;
    }
  }

  /** PostgreSQL going away must not lose acknowledged work: retry (reconnecting) until it is back. */
  private async writeWithRetry(batches: CommitBatch[]): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.write(batches);
        return;
      } catch (err) {
        if (this.closed) return;
        this.log.error({ err, attempt }, 'writing to PostgreSQL failed; retrying');
        await new Promise((r) => setTimeout(r, Math.min(5000, 100 * attempt)));
        await this.writer.end().catch(() => {});
        this.writer = new pg.Client({ connectionString: this.url, options: `-c search_path=${this.schema}` });
        this.writer.on('error', (e) => this.log.warn({ err: e }, 'PostgreSQL writer connection failed'));
        await this.writer
          .connect()
          .then(() => PostgresStore.takeOwnership(this.writer, this.schema))
          .catch((e) => this.log.warn({ err: e }, 'reconnecting to PostgreSQL failed'));
      }
    }
  }

  private async write(batches: CommitBatch[]): Promise<void> {
    // Later writes of the same run carry its newer state; all of its events are kept, in order.
    const latest = new Map<string, CommitBatch['executions'][number]>();
    const history: { ns: string[]; run: string[]; first: number[]; events: Buffer[] } = { ns: [], run: [], first: [], events: [] };
    const current = new Map<string, { namespace: string; workflowId: string; runId: string }>();
    const schedules = new Map<string, CommitBatch['schedules'][number]>();
    for (const b of batches) {
      for (const w of b.schedules) schedules.set(`${w.namespace}/${w.scheduleId}`, w);
      for (const w of b.executions) {
        latest.set(`${w.row.namespace}/${w.row.runId}`, w);
        if (w.events.length) {
          history.ns.push(w.row.namespace);
          history.run.push(w.row.runId);
          history.first.push(w.firstEventId);
          history.events.push(encodeHistoryBody(w.events));
        }
      }
      for (const c of b.currentRuns) current.set(`${c.namespace}/${c.workflowId}`, c);
    }
    const writes = [...latest.values()];
    const rows = writes.map((w) => w.row);
    const cur = [...current.values()];
    const sch = [...schedules.values()];
    // One statement, so one round trip and one implicit transaction for the whole group.
    await this.writer.query(
      `WITH h AS (
         INSERT INTO history (namespace, run_id, first_event_id, events)
         SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bytea[])
       ), c AS (
         INSERT INTO current_runs (namespace, workflow_id, run_id)
         SELECT * FROM unnest($5::text[], $6::text[], $7::text[])
         ON CONFLICT (namespace, workflow_id) DO UPDATE SET run_id = excluded.run_id
       ), s AS (
         INSERT INTO schedules (namespace, schedule_id, state, deleted)
         SELECT * FROM unnest($27::text[], $28::text[], $29::text[], $30::boolean[])
         ON CONFLICT (namespace, schedule_id) DO UPDATE SET state = excluded.state, deleted = excluded.deleted
       )
       INSERT INTO executions (namespace, run_id, workflow_id, workflow_type, task_queue, status, start_time,
         execution_time, close_time, history_length, history_size_bytes, state_transitions, parent_workflow_id,
         parent_run_id, root_workflow_id, root_run_id, start_request_id, search_attributes, state)
       SELECT * FROM unnest($8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::int[], $14::bigint[],
         $15::bigint[], $16::bigint[], $17::bigint[], $18::bigint[], $19::bigint[], $20::text[], $21::text[],
         $22::text[], $23::text[], $24::text[], $25::jsonb[], $26::text[])
       ON CONFLICT (namespace, run_id) DO UPDATE SET
         workflow_type = excluded.workflow_type, task_queue = excluded.task_queue, status = excluded.status,
         execution_time = excluded.execution_time, close_time = excluded.close_time,
         history_length = excluded.history_length, history_size_bytes = excluded.history_size_bytes,
         state_transitions = excluded.state_transitions, search_attributes = excluded.search_attributes,
         state = excluded.state`,
      [
        history.ns,
        history.run,
        history.first,
        history.events,
        cur.map((x) => x.namespace),
        cur.map((x) => x.workflowId),
        cur.map((x) => x.runId),
        rows.map((r) => r.namespace),
        rows.map((r) => r.runId),
        rows.map((r) => r.workflowId),
        rows.map((r) => r.workflowType),
        rows.map((r) => r.taskQueue),
        rows.map((r) => r.status),
        rows.map((r) => r.startTime),
        rows.map((r) => r.executionTime),
        rows.map((r) => r.closeTime ?? null),
        rows.map((r) => r.historyLength),
        rows.map((r) => r.historySizeBytes),
        rows.map((r) => r.stateTransitions),
        rows.map((r) => r.parentWorkflowId ?? null),
        rows.map((r) => r.parentRunId ?? null),
        rows.map((r) => r.rootWorkflowId ?? null),
        rows.map((r) => r.rootRunId ?? null),
        writes.map((w) => w.startRequestId),
        rows.map((r) => JSON.stringify(r.searchAttributes)),
        writes.map((w) => w.state),
        sch.map((w) => w.namespace),
        sch.map((w) => w.scheduleId),
        sch.map((w) => w.state),
        sch.map((w) => w.deleted),
      ],
    );
  }

  // ------------------------------------------------------------------ reads

  async loadNamespaces(): Promise<NamespaceRecord[]> {
    const { rows } = await this.pool.query<{ data: NamespaceRecord }>('SELECT data FROM namespaces ORDER BY name');
    return rows.map((r) => r.data);
  }

  async saveNamespace(ns: NamespaceRecord): Promise<void> {
    await this.pool.query(`INSERT INTO namespaces (name, data) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET data = excluded.data`, [
      ns.name,
      JSON.stringify(ns),
    ]);
  }

  async loadSchedules(): Promise<string[]> {
    const { rows } = await this.pool.query<{ state: string }>('SELECT state FROM schedules WHERE NOT deleted ORDER BY namespace, schedule_id');
    return rows.map((r) => r.state);
  }

  private static collectHistory(rows: { events: Buffer }[]): Buffer[] {
    const out: Buffer[] = [];
    for (const r of rows) out.push(...splitHistoryBody(r.events));
    return out;
  }

  async loadOpenExecutions(): Promise<PersistedExecution[]> {
    const { rows } = await this.pool.query<{ namespace: string; run_id: string; state: string }>(
      'SELECT namespace, run_id, state FROM executions WHERE status = 1',
    );
    const byRun = new Map<string, PersistedExecution>();
    for (const r of rows) byRun.set(`${r.namespace}/${r.run_id}`, { record: JSON.parse(r.state) as ExecutionRecord, history: [] });
    if (!byRun.size) return [];
    const h = await this.pool.query<{ namespace: string; run_id: string; events: Buffer }>(
      `SELECT h.namespace, h.run_id, h.events FROM history h
       JOIN executions e ON e.namespace = h.namespace AND e.run_id = h.run_id
       WHERE e.status = 1 ORDER BY h.namespace, h.run_id, h.first_event_id`,
    );
    for (const r of h.rows) byRun.get(`${r.namespace}/${r.run_id}`)?.history.push(...splitHistoryBody(r.events));
    return [...byRun.values()];
  }

  async loadExecution(namespace: string, runId: string): Promise<PersistedExecution | undefined> {
    const { rows } = await this.pool.query<{ state: string }>('SELECT state FROM executions WHERE namespace = $1 AND run_id = $2', [namespace, runId]);
    if (!rows.length) return undefined;
    const h = await this.pool.query<{ events: Buffer }>('SELECT events FROM history WHERE namespace = $1 AND run_id = $2 ORDER BY first_event_id', [
      namespace,
      runId,
    ]);
    return { record: JSON.parse(rows[0].state) as ExecutionRecord, history: PostgresStore.collectHistory(h.rows) };
  }

  async currentRun(namespace: string, workflowId: string): Promise<CurrentRunInfo | undefined> {
    const { rows } = await this.pool.query<{ run_id: string; status: number; start_request_id: string }>(
      `SELECT e.run_id, e.status, e.start_request_id FROM current_runs c
       JOIN executions e ON e.namespace = c.namespace AND e.run_id = c.run_id
       WHERE c.namespace = $1 AND c.workflow_id = $2`,
      [namespace, workflowId],
    );
    const r = rows[0];
    return r ? { runId: r.run_id, status: r.status, startRequestId: r.start_request_id } : undefined;
  }

  async list(namespace: string, query: VisibilityQuery, offset: number, limit: number): Promise<ListPage> {
    const p = new SqlParams();
    const ns = p.add(namespace);
    const { where, orderBy } = compileVisibilityQuery(query, p);
    const { rows } = await this.pool.query<{ state: string }>(
      `SELECT state FROM executions WHERE namespace = ${ns} AND ${where} ORDER BY ${orderBy} OFFSET ${p.add(offset)} LIMIT ${p.add(limit + 1)}`,
      p.values,
    );
    const more = rows.length > limit;
    return {
      records: rows.slice(0, limit).map((r) => JSON.parse(r.state) as ExecutionRecord),
      nextOffset: more ? offset + limit : undefined,
    };
  }

  async count(namespace: string, query: VisibilityQuery): Promise<number> {
    const p = new SqlParams();
    const ns = p.add(namespace);
    const { where } = compileVisibilityQuery(query, p);
    const { rows } = await this.pool.query<{ n: string }>(`SELECT count(*) AS n FROM executions WHERE namespace = ${ns} AND ${where}`, p.values);
    return Number(rows[0].n);
  }

  async countByStatus(namespace: string, query: VisibilityQuery): Promise<Map<number, number>> {
    const p = new SqlParams();
    const ns = p.add(namespace);
    const { where } = compileVisibilityQuery(query, p);
    const { rows } = await this.pool.query<{ status: number; n: string }>(
      `SELECT status, count(*) AS n FROM executions WHERE namespace = ${ns} AND ${where} GROUP BY status`,
      p.values,
    );
    return new Map(rows.map((r) => [r.status, Number(r.n)]));
  }

  async deleteClosedBefore(namespace: string, cutoff: number): Promise<number> {
    const { rowCount } = await this.pool.query(
      `WITH gone AS (
         DELETE FROM executions WHERE namespace = $1 AND close_time IS NOT NULL AND close_time < $2
         RETURNING namespace, run_id, workflow_id
       ), h AS (
         DELETE FROM history USING gone WHERE history.namespace = gone.namespace AND history.run_id = gone.run_id
       ), c AS (
         DELETE FROM current_runs USING gone
         WHERE current_runs.namespace = gone.namespace AND current_runs.run_id = gone.run_id
       )
       SELECT 1 FROM gone`,
      [namespace, cutoff],
    );
    return rowCount ?? 0;
  }

  async close(): Promise<void> {
    // Let queued writes finish (each belongs to an operation waiting for it), unless PostgreSQL is gone.
    const deadline = Date.now() + 5000;
    while ((this.writing || this.queue.length) && Date.now() < deadline) {
      if (!this.writing) void this.drain();
      await new Promise((r) => setTimeout(r, 10));
    }
    this.closed = true;
    await this.writer.end().catch(() => {});
    await this.pool.end().catch(() => {});
  }
}
