import type Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import { clearSessionCookie, setSessionCookie, signSession } from '../../http/auth';
import { endpoint } from '../../http/endpoint';
import { forbidden } from '../../errors';
import type { Guards } from '../../http/guards';
import { deletedResponse, okResponse } from '../../http/responses';
import { uuidPath } from '../../validation';
import type { WorkflowStarter } from '../workflow-starter';
import { inviteMemberByEmail, requestPasswordReset, requestVerification, resetPassword, signupAndVerify, verifyEmail } from './account-emails';
import { changeRole, listMembers, removeMember } from './members.service';
import { deleteProject, resetProject } from './project-lifecycle';
import { setupState } from './setup-state';
import {
  changeRoleSchema,
  createProjectSchema,
  credentialsSchema,
  inviteMemberSchema,
  loginSchema,
  memberResponse,
  projectResponse,
  requestPasswordResetSchema,
  resetPasswordSchema,
  setupStateResponse,
  updateProjectSchema,
  userResponse,
  verifyEmailSchema,
} from './accounts.schemas';
import { createProject, getUser, listProjects, login, membership, regenerateKeys, requireRole, toUserDto, updateProject } from './accounts.service';

export interface AccountSettings {
  jwtSecret: string;
  disableSignup: boolean;
  /** Called after a project's keys or status changed, before the response. */
  projectChanged(projectId: string): void;
  temporal: WorkflowStarter;
}

const auth = 'Auth';
const projects = 'Projects';
const members = 'Team members';
const NOT_MEMBER = { 404: 'No such project among the caller’s' };
const OWNER_ADMIN = { ...NOT_MEMBER, 403: 'The caller is not OWNER or ADMIN (INSUFFICIENT_ROLE)' };
const OWNER_ONLY = { ...NOT_MEMBER, 403: 'The caller is not the OWNER (INSUFFICIENT_ROLE)' };
const MANAGE = { ...NOT_MEMBER, 403: 'The caller’s role cannot make this change (INSUFFICIENT_ROLE)' };

export function accountRoutes(router: Router, g: Guards, settings: AccountSettings): void {
  const startSession = (ctx: Context, user: { id: string; email: string }) =>
    setSessionCookie(ctx, signSession(settings.jwtSecret, { sub: user.id, email: user.email }));

  router.post(
    '/auth/signup',
    g.body,
    endpoint(
      {
        tag: auth,
        summary: 'Sign up, and start a session',
        description: 'Sets the session cookie and sends a verification email.',
        body: credentialsSchema,
        responses: { 201: userResponse.describe('The new user') },
        errors: { 403: 'Signup is disabled on this server (SIGNUP_DISABLED)', 409: 'An account with this email exists (EMAIL_TAKEN)' },
      },
      async (ctx, input) => {
        if (settings.disableSignup) throw forbidden('Signup is disabled on this server', 'SIGNUP_DISABLED');
        const { email, password } = input.body();
        const user = await signupAndVerify(ctx.state.em, settings.temporal, ctx.state.log, email, password);
        startSession(ctx, user);
        ctx.status = 201;
        ctx.body = toUserDto(user);
      },
    ),
  );

  router.post(
    '/auth/login',
    g.body,
    endpoint(
      {
        tag: auth,
        summary: 'Log in with email and password; sets the session cookie',
        body: loginSchema,
        responses: { 200: userResponse.describe('The user') },
        errors: { 401: 'Email or password is incorrect (INVALID_CREDENTIALS)' },
      },
      async (ctx, input) => {
        const { email, password } = input.body();
        const user = await login(ctx.state.em, email, password);
        startSession(ctx, user);
        ctx.body = toUserDto(user);
      },
    ),
  );

  router.get(
    '/auth/logout',
    endpoint({ tag: auth, summary: 'Clear the session cookie', responses: { 200: okResponse.describe('Logged out') } }, async (ctx) => {
      clearSessionCookie(ctx);
      ctx.body = { success: true };
    }),
  );

  router.post(
    '/auth/verify-email',
    g.body,
    endpoint(
      {
        tag: auth,
        summary: 'Verify an email address with the token from its link',
        body: verifyEmailSchema,
        responses: { 200: userResponse.describe('The verified user') },
        errors: { 400: 'The link is invalid, expired or used (INVALID_TOKEN)' },
      },
      async (ctx, input) => {
        const userId = await verifyEmail(ctx.state.em, input.body().token);
        ctx.body = toUserDto(await getUser(ctx.state.em.fork(), userId));
      },
    ),
  );

  router.post(
    '/auth/request-verification',
    g.session,
    endpoint(
      {
        tag: auth,
        summary: 'Send the verification email again',
        responses: { 202: okResponse.describe('Queued') },
        errors: { 400: 'The address is already verified (ALREADY_VERIFIED)' },
      },
      async (ctx) => {
        await requestVerification(ctx.state.em, settings.temporal, ctx.state.user!.id);
        ctx.status = 202;
        ctx.body = { success: true };
      },
    ),
  );

  // The same answer whether or not the address has an account, so it reveals none.
  router.post(
    '/auth/request-password-reset',
    g.body,
    endpoint(
      {
        tag: auth,
        summary: 'Send a password reset email',
        description: 'The same answer whether or not the address has an account.',
        body: requestPasswordResetSchema,
        responses: { 202: okResponse.describe('Queued, if the address has an account') },
      },
      async (ctx, input) => {
        await requestPasswordReset(ctx.state.em, settings.temporal, input.body().email);
        ctx.status = 202;
        ctx.body = { success: true };
      },
    ),
  );

  router.post(
    '/auth/reset-password',
    g.body,
    endpoint(
      {
        tag: auth,
        summary: 'Set a new password with the token from a reset link',
        body: resetPasswordSchema,
        responses: { 200: okResponse.describe('Changed; the user’s other reset links stop working') },
        errors: { 400: 'The link is invalid, expired or used (INVALID_TOKEN)' },
      },
      async (ctx, input) => {
        const { token, password } = input.body();
        await resetPassword(ctx.state.em, token, password);
        ctx.body = { success: true };
      },
    ),
  );

  router.get(
    '/users/@me',
    g.session,
    endpoint({ tag: projects, summary: 'The current user', responses: { 200: userResponse.describe('The user') } }, async (ctx) => {
      ctx.body = toUserDto(await getUser(ctx.state.em, ctx.state.user!.id));
    }),
  );

  router.get(
    '/users/@me/projects',
    g.session,
    endpoint(
      { tag: projects, summary: 'The current user’s projects', responses: { 200: z.array(projectResponse).describe('With the user’s role in each') } },
      async (ctx) => {
        ctx.body = await listProjects(ctx.state.em, ctx.state.user!.id);
      },
    ),
  );

  router.post(
    '/users/@me/projects',
    g.session,
    endpoint(
      {
        tag: projects,
        summary: 'Create a project (the caller is its OWNER)',
        body: createProjectSchema,
        responses: { 201: projectResponse.describe('The new project and its keys') },
      },
      async (ctx, input) => {
        const { name } = input.body();
        ctx.status = 201;
        ctx.body = await createProject(ctx.state.em, ctx.state.user!.id, name);
      },
    ),
  );

  router.patch(
    '/users/@me/projects/:id',
    g.session,
    endpoint(
      {
        tag: projects,
        summary: 'Update a project’s name or settings (OWNER or ADMIN)',
        params: { id: uuidPath },
        body: updateProjectSchema,
        responses: { 200: projectResponse.describe('The updated project') },
        errors: OWNER_ADMIN,
      },
      async (ctx, input) => {
        const id = input.param('id');
        const role = await membership(ctx.state.em, ctx.state.user!.id, id);
        requireRole(role, ['OWNER', 'ADMIN'], 'change project settings');
        ctx.body = await updateProject(ctx.state.em, id, input.body(), role);
      },
    ),
  );

  router.post(
    '/users/@me/projects/:id/regenerate-keys',
    g.session,
    endpoint(
      {
        tag: projects,
        summary: 'Rotate both API keys (OWNER or ADMIN)',
        description: 'The old keys stop working at once.',
        params: { id: uuidPath },
        responses: { 200: projectResponse.describe('The project with its new keys') },
        errors: OWNER_ADMIN,
      },
      async (ctx, input) => {
        const id = input.param('id');
        const role = await membership(ctx.state.em, ctx.state.user!.id, id);
        requireRole(role, ['OWNER', 'ADMIN'], 'rotate API keys');
        ctx.body = await regenerateKeys(ctx.state.em, id, role);
        settings.projectChanged(id);
      },
    ),
  );

  // Irreversible, so OWNER only; the project's running workflows are cancelled first.
  router.post(
    '/users/@me/projects/:id/reset',
    g.session,
    endpoint(
      {
        tag: projects,
        summary: 'Wipe the project’s data, keeping the project and its keys (OWNER; irreversible)',
        params: { id: uuidPath },
        responses: { 200: z.object({ id: z.string(), reset: z.literal(true), cancelledWorkflows: z.number().int() }).describe('Reset') },
        errors: OWNER_ONLY,
      },
      async (ctx, input) => {
        const id = input.param('id');
        requireRole(await membership(ctx.state.em, ctx.state.user!.id, id), ['OWNER'], 'reset the project');
        ctx.body = { id, reset: true, ...(await resetProject(ctx.state.em, settings.temporal, id)) };
      },
    ),
  );

  router.delete(
    '/users/@me/projects/:id',
    g.session,
    endpoint(
      {
        tag: projects,
        summary: 'Delete the project (OWNER; irreversible)',
        params: { id: uuidPath },
        responses: { 200: deletedResponse.describe('Deleted') },
        errors: OWNER_ONLY,
      },
      async (ctx, input) => {
        const id = input.param('id');
        requireRole(await membership(ctx.state.em, ctx.state.user!.id, id), ['OWNER'], 'delete the project');
        await deleteProject(ctx.state.em, settings.temporal, id);
        settings.projectChanged(id);
        ctx.body = { id, deleted: true };
      },
    ),
  );

  router.get(
    '/projects/:id/setup-state',
    g.session,
    endpoint(
      {
        tag: projects,
        summary: 'Which onboarding steps the project has done',
        params: { id: uuidPath },
        responses: { 200: setupStateResponse.describe('Each step, true once done') },
        errors: NOT_MEMBER,
      },
      async (ctx, input) => {
        const id = input.param('id');
        await membership(ctx.state.em, ctx.state.user!.id, id);
        ctx.body = await setupState(ctx.state.em, id);
      },
    ),
  );

  // Teams: any member sees the list; OWNER and ADMIN manage it (only an OWNER touches the OWNER role).
  router.get(
    '/projects/:id/members',
    g.session,
    endpoint(
      {
        tag: members,
        summary: 'List members and pending invitations',
        params: { id: uuidPath },
        responses: { 200: z.object({ data: z.array(memberResponse) }).describe('Members, oldest first') },
        errors: NOT_MEMBER,
      },
      async (ctx, input) => {
        const id = input.param('id');
        await membership(ctx.state.em, ctx.state.user!.id, id);
        ctx.body = { data: await listMembers(ctx.state.em, id) };
      },
    ),
  );

  router.post(
    '/projects/:id/members',
    g.session,
    endpoint(
      {
        tag: members,
        summary: 'Invite a member (OWNER or ADMIN)',
        description: 'A verified account joins at once; otherwise the invitation waits until that address is verified.',
        params: { id: uuidPath },
        body: inviteMemberSchema,
        responses: { 201: memberResponse.describe('The member or invitation') },
        errors: { ...MANAGE, 409: 'Already a member (ALREADY_MEMBER) or invited (ALREADY_INVITED)' },
      },
      async (ctx, input) => {
        const id = input.param('id');
        const role = await membership(ctx.state.em, ctx.state.user!.id, id);
        const actor = { userId: ctx.state.user!.id, role };
        ctx.status = 201;
        ctx.body = await inviteMemberByEmail(ctx.state.em, settings.temporal, ctx.state.log, id, actor, input.body());
      },
    ),
  );

  router.patch(
    '/projects/:id/members/:userId',
    g.session,
    endpoint(
      {
        tag: members,
        summary: 'Change a member’s role',
        params: { id: uuidPath, userId: uuidPath },
        body: changeRoleSchema,
        responses: { 200: memberResponse.describe('The member') },
        errors: { ...MANAGE, 404: 'No such project or member', 409: 'The last OWNER keeps that role (LAST_OWNER)' },
      },
      async (ctx, input) => {
        const id = input.param('id');
        const target = input.param('userId');
        const role = await membership(ctx.state.em, ctx.state.user!.id, id);
        await changeRole(ctx.state.em, id, role, target, input.body().role);
        ctx.body = (await listMembers(ctx.state.em, id)).find((m) => m.id === target);
      },
    ),
  );

  router.delete(
    '/projects/:id/members/:userId',
    g.session,
    endpoint(
      {
        tag: members,
        summary: 'Remove a member or withdraw an invitation',
        params: { id: uuidPath, userId: uuidPath },
        responses: { 200: deletedResponse.describe('Removed') },
        errors: { ...MANAGE, 404: 'No such project or member', 409: 'The last OWNER cannot be removed (LAST_OWNER)' },
      },
      async (ctx, input) => {
        const id = input.param('id');
        const target = input.param('userId');
        const role = await membership(ctx.state.em, ctx.state.user!.id, id);
        await removeMember(ctx.state.em, id, { userId: ctx.state.user!.id, role }, target);
        ctx.body = { id: target, deleted: true };
      },
    ),
  );
}
