import type Router from '@koa/router';
import { z } from 'zod';
import { endpoint } from './endpoint';

export interface HealthCheck {
  name: string;
  check(): Promise<void>;
}

/**
 * A listener of this process: `down` when its default port was taken at start (another process of ours
 * on this machine, say), which leaves the process running without it. Reported, not failed: a second
 * API process on one machine is a fair set-up, but the gap must show.
 */
export interface ListenerState {
  status: 'listening' | 'down';
  port: number;
  error?: string;
}

const TIMEOUT_MS = 3000;

function withTimeout(p: Promise<void>): Promise<void> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    p,
    new Promise<void>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${TIMEOUT_MS} ms`)), TIMEOUT_MS);
    }),
  ]).finally(() => clearTimeout(timer));
}

const healthResponse = z.object({
  status: z.enum(['ok', 'error']),
  failing: z.array(z.string()).optional(),
  checks: z.record(z.string(), z.object({ status: z.enum(['ok', 'error']), error: z.string().optional() })),
  listeners: z
    .record(z.string(), z.object({ status: z.enum(['listening', 'down']), port: z.number().int(), error: z.string().optional() }))
    .describe("This process's SMTP listeners (inboundMx, submission); `down` does not fail the check"),
});

/** 200 only when every dependency answers; 503 naming the parts that do not. */
export function healthRoutes(router: Router, checks: HealthCheck[], listeners: ReadonlyMap<string, ListenerState> = new Map()): void {
  const spec = {
    tag: 'Health',
    summary: 'Whether every dependency answers',
    internal: true,
    responses: { 200: healthResponse.describe('All dependencies answer'), 503: healthResponse.describe('Some do not; `failing` names them') },
  };
  router.get(
    '/health',
    endpoint(spec, async (ctx) => {
      const results = await Promise.all(
        checks.map(async (c) => {
          try {
            await withTimeout(c.check());
            return [c.name, { status: 'ok' }] as const;
          } catch (err) {
            return [c.name, { status: 'error', error: (err as Error).message }] as const;
          }
        }),
      );
      const failing = results.filter(([, r]) => r.status !== 'ok').map(([name]) => name);
      ctx.status = failing.length ? 503 : 200;
      ctx.body = {
        status: failing.length ? 'error' : 'ok',
        ...(failing.length ? { failing } : {}),
        checks: Object.fromEntries(results),
        listeners: Object.fromEntries(listeners),
      };
    }),
  );
}
