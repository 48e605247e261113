import type { Context, Next } from 'koa';
import jwt from 'jsonwebtoken';
import { type ProjectKeyCache, sessionUser } from '../modules/accounts';
import { documented } from './endpoint';
import { forbidden, unauthorized } from '../errors';

export type KeyKind = 'public' | 'secret';

export const SESSION_COOKIE = 'token';
const SESSION_DAYS = 7;

function bearer(ctx: Context): string | undefined {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(ctx.get('authorization'));
  return m?.[1];
}

/** `pk_` keys work only where `kind` is public, `sk_` keys only where it is secret. */
export function apiKey(kind: KeyKind, keys: ProjectKeyCache) {
  return documented(
    async (ctx: Context, next: Next): Promise<void> => {
      const key = bearer(ctx);
      if (!key) throw unauthorized('Missing API key: send "Authorization: Bearer <key>"');
      const given: KeyKind | undefined = key.startsWith('pk_') ? 'public' : key.startsWith('sk_') ? 'secret' : undefined;
      if (!given) throw unauthorized('Invalid API key', 'INVALID_API_KEY');
      if (given !== kind) {
        throw unauthorized(
          kind === 'public'
            ? 'This endpoint accepts only the public key (pk_)'
            : 'This endpoint requires the secret key (sk_); the public key only works on POST /v1/track and POST /v1/subscribe',
          'INVALID_API_KEY',
        );
      }
      const owner = await keys.lookup(ctx.state.em, kind, key);
      if (!owner) throw unauthorized('Invalid API key', 'INVALID_API_KEY');
      if (owner.disabled) {
        throw forbidden(`Project is disabled${owner.disabledReason ? `: ${owner.disabledReason}` : ''}`, 'PROJECT_DISABLED');
      }
      ctx.state.project = { id: owner.projectId, keyKind: kind };
      await next();
    },
    { security: kind === 'public' ? 'publicKey' : 'secretKey' },
  );
}

export interface SessionClaims {
  sub: string;
  email: string;
}

export function signSession(secret: string, claims: SessionClaims): string {
  return jwt.sign(claims, secret, { algorithm: 'HS256', expiresIn: `${SESSION_DAYS}d` });
}

export function setSessionCookie(ctx: Context, token: string): void {
  ctx.cookies.set(SESSION_COOKIE, token, {
    httpOnly: true,
    sameSite: 'lax',
    secure: ctx.secure,
    maxAge: SESSION_DAYS * 24 * 3600 * 1000,
    overwrite: true,
  });
}

export function clearSessionCookie(ctx: Context): void {
  ctx.cookies.set(SESSION_COOKIE, '', { httpOnly: true, sameSite: 'lax', maxAge: 0, overwrite: true });
}

/** Dashboard endpoints: the JWT cookie set by signup or login (or the same token as a Bearer header). */
export function session(secret: string) {
  return documented(
    async (ctx: Context, next: Next): Promise<void> => {
      const token = ctx.cookies.get(SESSION_COOKIE) || bearer(ctx);
      if (!token) throw unauthorized('Not logged in');
      let claims: SessionClaims;
      try {
        claims = jwt.verify(token, secret, { algorithms: ['HS256'] }) as SessionClaims;
      } catch {
        throw unauthorized('Session is invalid or expired');
      }
      const user = await sessionUser(ctx.state.em, claims.sub);
      if (!user) throw unauthorized('Session is invalid or expired');
      ctx.state.user = user;
      await next();
    },
    { security: 'session' },
  );
}
