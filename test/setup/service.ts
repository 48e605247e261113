import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Role } from '../../src/config';
import { loadConfig } from '../../src/config';
import { createLogger, type Logger } from '../../src/log';
import { type Service, startService } from '../../src/main';
import { freePort } from '../../src/db/embedded-postgres';
import { createTestDatabase } from './db';
import { ACCOUNT_MAIL_SENDER } from './smtp-sink';

export interface ApiResponse<T = any> {
  status: number;
  body: T;
  headers: Headers;
}

export interface RequestOptions {
  body?: unknown;
  /** Raw request body (sent as is, with JSON content type unless headers say otherwise). */
  raw?: string | Buffer;
  key?: string;
  cookie?: string;
  headers?: Record<string, string>;
}

/** A tiny HTTP client for the service under test: real requests over loopback. */
export class Api {
  constructor(readonly baseUrl: string) {}

  async request<T = any>(method: string, p: string, opts: RequestOptions = {}): Promise<ApiResponse<T>> {
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.key) headers.authorization = `Bearer ${opts.key}`;
    if (opts.cookie) headers.cookie = opts.cookie;
    let payload: string | Buffer | undefined;
    if (opts.raw !== undefined) payload = opts.raw;
    else if (opts.body !== undefined) payload = JSON.stringify(opts.body);
    if (payload !== undefined && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) {
      headers['content-type'] = 'application/json';
    }
    const res = await fetch(this.baseUrl + p, { method, headers, body: payload });
    const text = await res.text();
    let body: any = text;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      /* not JSON */
    }
    return { status: res.status, body, headers: res.headers };
  }

  get = <T = any>(p: string, o?: RequestOptions) => this.request<T>('GET', p, o);
  post = <T = any>(p: string, body?: unknown, o?: RequestOptions) => this.request<T>('POST', p, { ...o, body });
  patch = <T = any>(p: string, body?: unknown, o?: RequestOptions) => this.request<T>('PATCH', p, { ...o, body });
  put = <T = any>(p: string, body?: unknown, o?: RequestOptions) => this.request<T>('PUT', p, { ...o, body });
  delete = <T = any>(p: string, o?: RequestOptions) => this.request<T>('DELETE', p, o);
}

export interface TestService extends Service {
  api: Api;
  dataDir: string;
  env: Record<string, string>;
}

/**
 * Starts the real service in this process on a fresh database (cloned from the migrated template),
 * a random port, and the built-in capture SMTP server unless SMTP_URL is given. `log` replaces the
 * logger (tests that read what the service logs).
 */
export async function startTestService(env: Record<string, string> = {}, role: Role = 'all', log?: Logger): Promise<TestService> {
  // The free port is chosen before the service listens on it, so another test process can take it in
  // between: a service that found its port taken (it stopped what it had started) tries another.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startTestServiceOnce(env, role, log);
    } catch (err) {
      const taken = (err as NodeJS.ErrnoException).code === 'EADDRINUSE';
      if (!taken || env.PORT !== undefined || attempt >= 3) throw err;
    }
  }
}

async function startTestServiceOnce(env: Record<string, string>, role: Role, log?: Logger): Promise<TestService> {
  const databaseUrl = env.DATABASE_URL ?? (await createTestDatabase());
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'postbox-svc-'));
  // A known port, so PUBLIC_URL (the base of every link in mail) points at this very server.
  const port = role === 'worker' ? '0' : String(env.PORT ?? (await freePort()));
  const fullEnv = {
    DATABASE_URL: databaseUrl,
    DATA_DIR: dataDir,
    PORT: port,
    PUBLIC_URL: `http://127.0.0.1:${port}`,
    HOST: '127.0.0.1',
    SYSTEM_EMAIL_FROM: ACCOUNT_MAIL_SENDER,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    DATABASE_POOL_MAX: '5',
    // Each test service gets its own in-memory Temporal dev server on a free port, unless
    // TEMPORAL_ADDRESS points the whole suite at another server.
    TEMPORAL_DEV_SERVER_PORT: '0',
    TEMPORAL_DEV_SERVER_PERSISTENCE: 'memory',
    // Off unless a test asks for them: their default ports would be shared by every service the suite starts.
    SMTP_SUBMISSION_PORT: '0',
    INBOUND_SMTP_PORT: '0',
    ...(process.env.TEMPORAL_ADDRESS ? { TEMPORAL_ADDRESS: process.env.TEMPORAL_ADDRESS } : {}),
    ...env,
  };
  const config = loadConfig(fullEnv);
  const service = await startService(role, config, log ?? createLogger(config.LOG_LEVEL));
  return {
    ...service,
    api: new Api(service.url ?? ''),
    dataDir,
    env: fullEnv,
    stop: async () => {
      await service.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export interface Account {
  cookie: string;
  user: { id: string; email: string };
  project: { id: string; name: string; publicKey: string; secretKey: string };
}

let counter = 0;

/** Signs a new user up and creates a project: the way a real user gets keys. */
export async function createAccount(api: Api, name = 'Test project'): Promise<Account> {
  const email = `owner${++counter}-${Date.now()}@example.com`;
  const signup = await api.post('/auth/signup', { email, password: 'correct horse battery' });
  if (signup.status !== 201) throw new Error(`signup failed: ${signup.status} ${JSON.stringify(signup.body)}`);
  const cookie = (signup.headers.get('set-cookie') ?? '').split(';')[0];
  const project = await api.post('/users/@me/projects', { name }, { cookie });
  if (project.status !== 201) throw new Error(`project failed: ${project.status} ${JSON.stringify(project.body)}`);
  return { cookie, user: signup.body, project: project.body };
}

/**
 * The settings of a worker process (`node dist/src/main.js worker`) joining `api`'s database and
 * Temporal server and delivering to `smtpUrl`, with a DATA_DIR of its own.
 */
export function workerEnvOf(api: TestService, smtpUrl: string, dnsAddress: string): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    LOG_LEVEL: 'warn',
    DATABASE_URL: api.databaseUrl,
    TEMPORAL_ADDRESS: api.temporal.address,
    SMTP_URL: smtpUrl,
    DNS_SERVERS: dnsAddress,
    JWT_SECRET: api.env.JWT_SECRET,
    PUBLIC_URL: api.env.PUBLIC_URL,
    SYSTEM_EMAIL_FROM: api.env.SYSTEM_EMAIL_FROM,
    DATA_DIR: fs.mkdtempSync(path.join(os.tmpdir(), 'postbox-worker-')),
  };
}
