import type Router from '@koa/router';
import type { Context } from 'koa';
import { clearSessionCookie, setSessionCookie, signSession } from '../../http/auth';
import { badRequest, forbidden } from '../../http/errors';
import type { Guards } from '../../http/guards';
import { body, uuidParam } from '../../http/validate';
import type { TemporalClient } from '../../../temporal/client';
import { queueAccountEmail, resetPassword, userIdByEmail, verifyEmail } from './account-emails';
import { changeRole, inviteMember, listMembers, removeMember } from './members.service';
import { deleteProject, resetProject } from './project-lifecycle';
import { setupState } from './setup-state';
import {
  changeRoleSchema,
  createProjectSchema,
  credentialsSchema,
  inviteMemberSchema,
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
    await queueAccountEmail(settings.temporal, { userId: user.id, purpose: 'verify_email' }).catch((err) =>
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
    await queueAccountEmail(settings.temporal, { userId: user.id, purpose: 'verify_email' });
    ctx.status = 202;
    ctx.body = { success: true };
  });

  // The same answer whether or not the address has an account, so it reveals none.
  router.post('/auth/request-password-reset', g.body, async (ctx) => {
    const { email } = body(ctx, requestPasswordResetSchema);
    const userId = await userIdByEmail(ctx.state.em, email);
    if (userId) await queueAccountEmail(settings.temporal, { userId, purpose: 'reset_password' });
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

  // Irreversible, so OWNER only; the project's running workflows are cancelled first.
  router.post('/users/@me/projects/:id/reset', g.session, async (ctx) => {
    const id = uuidParam(ctx);
    requireRole(await membership(ctx.state.em, ctx.state.user!.id, id), ['OWNER'], 'reset the project');
    ctx.body = { id, reset: true, ...(await resetProject(ctx.state.em, settings.temporal, id)) };
  });

  router.delete('/users/@me/projects/:id', g.session, async (ctx) => {
    const id = uuidParam(ctx);
    requireRole(await membership(ctx.state.em, ctx.state.user!.id, id), ['OWNER'], 'delete the project');
    await deleteProject(ctx.state.em, settings.temporal, id);
    settings.projectChanged(id);
    ctx.body = { id, deleted: true };
  });

  router.get('/projects/:id/setup-state', g.session, async (ctx) => {
    const id = uuidParam(ctx);
    await membership(ctx.state.em, ctx.state.user!.id, id);
    ctx.body = await setupState(ctx.state.em, id);
  });

  // Teams: any member sees the list; OWNER and ADMIN manage it (only an OWNER touches the OWNER role).
  router.get('/projects/:id/members', g.session, async (ctx) => {
    const id = uuidParam(ctx);
    await membership(ctx.state.em, ctx.state.user!.id, id);
    ctx.body = { data: await listMembers(ctx.state.em, id) };
  });

  router.post('/projects/:id/members', g.session, async (ctx) => {
    const id = uuidParam(ctx);
    const role = await membership(ctx.state.em, ctx.state.user!.id, id);
    const input = body(ctx, inviteMemberSchema);
    const member = await inviteMember(ctx.state.em, id, role, ctx.state.user!.id, input.email, input.role);
    await queueAccountEmail(settings.temporal, { invite: { email: input.email, projectId: id, role: input.role } }).catch((err) =>
      ctx.state.log?.warn({ err, projectId: id }, 'could not queue the invitation email'),
    );
    ctx.status = 201;
    ctx.body = member;
  });

  router.patch('/projects/:id/members/:userId', g.session, async (ctx) => {
    const id = uuidParam(ctx);
    const target = uuidParam(ctx, 'userId');
    const role = await membership(ctx.state.em, ctx.state.user!.id, id);
    await changeRole(ctx.state.em, id, role, target, body(ctx, changeRoleSchema).role);
    ctx.body = (await listMembers(ctx.state.em, id)).find((m) => m.id === target);
  });

  router.delete('/projects/:id/members/:userId', g.session, async (ctx) => {
    const id = uuidParam(ctx);
    const target = uuidParam(ctx, 'userId');
    const role = await membership(ctx.state.em, ctx.state.user!.id, id);
    await removeMember(ctx.state.em, id, { userId: ctx.state.user!.id, role }, target);
    ctx.body = { id: target, deleted: true };
  });
}
