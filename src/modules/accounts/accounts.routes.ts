import type Router from '@koa/router';
import type { Context } from 'koa';
import { clearSessionCookie, setSessionCookie, signSession } from '../../http/auth';
import { badRequest, forbidden } from '../../http/errors';
import type { Guards } from '../../http/guards';
import { body, uuidParam } from '../../http/validate';
import type { TemporalClient } from '../../../temporal/client';
import { queueAccountEmail, resetPassword, userIdByEmail, verifyEmail } from './account-emails';
import {
  createProjectSchema,
  credentialsSchema,
  loginSchema,
  requestPasswordResetSchema,
  resetPasswordSchema,
  updateProjectSchema,
  verifyEmailSchema,
} from './accounts.schemas';
import {
  createProject,
  getUser,
  listProjects,
  login,
  membership,
  regenerateKeys,
  requireRole,
  signup,
  toUserDto,
  updateProject,
} from './accounts.service';

export interface AccountSettings {
  jwtSecret: string;
  disableSignup: boolean;
  /** Called after a project's keys or status changed, before the response. */
  projectChanged(projectId: string): void;
  temporal: TemporalClient;
}

export function accountRoutes(router: Router, g: Guards, settings: AccountSettings): void {
  const startSession = (ctx: Context, user: { id: string; email: string }) =>
    setSessionCookie(ctx, signSession(settings.jwtSecret, { sub: user.id, email: user.email }));

  router.post('/auth/signup', g.body, async (ctx) => {
    if (settings.disableSignup) throw forbidden('Signup is disabled on this server', 'SIGNUP_DISABLED');
    const input = body(ctx, credentialsSchema);
    const user = await signup(ctx.state.em, input.email, input.password);
    // The verification mail is on its way, not awaited: signing up never depends on it.
    await queueAccountEmail(settings.temporal, user.id, 'verify_email').catch((err) =>
      ctx.state.log?.warn({ err, userId: user.id }, 'could not queue the verification email'),
    );
    startSession(ctx, user);
    ctx.status = 201;
    ctx.body = toUserDto(user);
  });

  router.post('/auth/login', g.body, async (ctx) => {
    const input = body(ctx, loginSchema);
    const user = await login(ctx.state.em, input.email, input.password);
    startSession(ctx, user);
    ctx.body = toUserDto(user);
  });

  router.get('/auth/logout', async (ctx) => {
    clearSessionCookie(ctx);
    ctx.body = { success: true };
  });

  router.post('/auth/verify-email', g.body, async (ctx) => {
    const { token } = body(ctx, verifyEmailSchema);
    const userId = await verifyEmail(ctx.state.em, token);
    ctx.body = toUserDto(await getUser(ctx.state.em.fork(), userId));
  });

  router.post('/auth/request-verification', g.session, async (ctx) => {
    const user = await getUser(ctx.state.em, ctx.state.user!.id);
    if (user.emailVerified) throw badRequest('This email address is already verified', 'ALREADY_VERIFIED');
    await queueAccountEmail(settings.temporal, user.id, 'verify_email');
    ctx.status = 202;
    ctx.body = { success: true };
  });

  // The same answer whether or not the address has an account, so it reveals none.
  router.post('/auth/request-password-reset', g.body, async (ctx) => {
    const { email } = body(ctx, requestPasswordResetSchema);
    const userId = await userIdByEmail(ctx.state.em, email);
    if (userId) await queueAccountEmail(settings.temporal, userId, 'reset_password');
    ctx.status = 202;
    ctx.body = { success: true };
  });

  router.post('/auth/reset-password', g.body, async (ctx) => {
    const { token, password } = body(ctx, resetPasswordSchema);
    await resetPassword(ctx.state.em, token, password);
    ctx.body = { success: true };
  });

  router.get('/users/@me', g.session, async (ctx) => {
    ctx.body = toUserDto(await getUser(ctx.state.em, ctx.state.user!.id));
  });

  router.get('/users/@me/projects', g.session, async (ctx) => {
    ctx.body = await listProjects(ctx.state.em, ctx.state.user!.id);
  });

  router.post('/users/@me/projects', g.session, async (ctx) => {
    const input = body(ctx, createProjectSchema);
    ctx.status = 201;
    ctx.body = await createProject(ctx.state.em, ctx.state.user!.id, input.name);
  });

  router.patch('/users/@me/projects/:id', g.session, async (ctx) => {
    const id = uuidParam(ctx);
    const role = await membership(ctx.state.em, ctx.state.user!.id, id);
    requireRole(role, ['OWNER', 'ADMIN'], 'change project settings');
    ctx.body = await updateProject(ctx.state.em, id, body(ctx, updateProjectSchema), role);
  });

  router.post('/users/@me/projects/:id/regenerate-keys', g.session, async (ctx) => {
    const id = uuidParam(ctx);
    const role = await membership(ctx.state.em, ctx.state.user!.id, id);
    requireRole(role, ['OWNER', 'ADMIN'], 'rotate API keys');
    ctx.body = await regenerateKeys(ctx.state.em, id, role);
    settings.projectChanged(id);
  });
}
