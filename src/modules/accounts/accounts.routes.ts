import type Router from '@koa/router';
import type { Context } from 'koa';
import { clearSessionCookie, setSessionCookie, signSession } from '../../http/auth';
import { forbidden } from '../../http/errors';
import type { Guards } from '../../http/guards';
import { body, uuidParam } from '../../http/validate';
import { createProjectSchema, credentialsSchema, loginSchema, updateProjectSchema } from './accounts.schemas';
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
}

export function accountRoutes(router: Router, g: Guards, settings: AccountSettings): void {
  const startSession = (ctx: Context, user: { id: string; email: string }) =>
    setSessionCookie(ctx, signSession(settings.jwtSecret, { sub: user.id, email: user.email }));

  router.post('/auth/signup', g.body, async (ctx) => {
    if (settings.disableSignup) throw forbidden('Signup is disabled on this server', 'SIGNUP_DISABLED');
    const input = body(ctx, credentialsSchema);
    const user = await signup(ctx.state.em, input.email, input.password);
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
