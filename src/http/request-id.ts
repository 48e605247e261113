import crypto from 'node:crypto';
import type { Context, Next } from 'koa';
import type { Logger } from 'pino';
import { withLogContext } from '../log';

const SAFE_ID = /^[A-Za-z0-9._:-]{1,128}$/;
// A random per-process prefix and a counter: unique without drawing randomness on every request.
const PREFIX = `req_${crypto.randomBytes(6).toString('hex')}`;
let sequence = 0;

/**
 * Gives every request an id (the caller's X-Request-Id when sane) and one access-log line. Every line
 * logged while the request runs carries the id, through `ctx.state.log` or any other logger of the process.
 */
export function requestId(log: Logger) {
  return async (ctx: Context, next: Next): Promise<void> => {
    const incoming = ctx.get('x-request-id');
    const id = SAFE_ID.test(incoming) ? incoming : `${PREFIX}${(++sequence).toString(36).padStart(6, '0')}`;
    ctx.state.requestId = id;
    ctx.state.log = log;
    ctx.set('X-Request-Id', id);
    const started = process.hrtime.bigint();
    await withLogContext({ requestId: id }, async () => {
      try {
        await next();
      } finally {
        const ms = Number(process.hrtime.bigint() - started) / 1e6;
        log.info({ method: ctx.method, path: ctx.path, status: ctx.status, ms: Math.round(ms * 10) / 10 }, 'request');
      }
    });
  };
}
