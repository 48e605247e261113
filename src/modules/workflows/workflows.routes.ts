import type Router from '@koa/router';
import type { Context } from 'koa';
import type { TemporalClient } from '../../../temporal/client';
import { sql } from '../../db/orm';
import { badRequest, notFound } from '../../http/errors';
import type { Guards } from '../../http/guards';
import { body, queryValue, uuidParam } from '../../http/validate';
import { cancelExecutions, executionSteps, getExecution, listExecutions, startExecution, toExecutionDto } from './executions.service';
import {
  createStepSchema,
  createTransitionSchema,
  createWorkflowSchema,
  EXECUTION_STATUSES,
  type ExecutionStatus,
  startExecutionSchema,
  updateStepSchema,
  updateWorkflowSchema,
} from './workflows.schemas';
import {
  addStep,
  addTransition,
  conditionFields,
  createWorkflow,
  deleteStep,
  deleteTransition,
  deleteWorkflow,
  getWorkflow,
  graphOf,
  graphProblems,
  listWorkflows,
  toStepDto,
  toTransitionDto,
  updateStep,
  updateWorkflow,
  workflowDto,
} from './workflows.service';

export function workflowRoutes(router: Router, g: Guards, deps: { temporal: TemporalClient }): void {
  const workflowOf = (ctx: Context) => getWorkflow(ctx.state.em, ctx.state.project!.id, uuidParam(ctx));

  router.get('/workflows', g.secret, async (ctx) => {
    ctx.body = { data: await listWorkflows(ctx.state.em, ctx.state.project!.id) };
  });

  router.get('/workflows/fields', g.secret, async (ctx) => {
    ctx.body = await conditionFields(ctx.state.em, ctx.state.project!.id);
  });

  router.post('/workflows', g.secret, async (ctx) => {
    const w = await createWorkflow(ctx.state.em, ctx.state.project!.id, body(ctx, createWorkflowSchema));
    ctx.status = 201;
    ctx.body = await workflowDto(ctx.state.em, w);
  });

  router.get('/workflows/:id', g.secret, async (ctx) => {
    ctx.body = await workflowDto(ctx.state.em, await workflowOf(ctx));
  });

  router.patch('/workflows/:id', g.secret, async (ctx) => {
    const w = await updateWorkflow(ctx.state.em, ctx.state.project!.id, uuidParam(ctx), body(ctx, updateWorkflowSchema));
    ctx.body = await workflowDto(ctx.state.em, w);
  });

  router.delete('/workflows/:id', g.secret, async (ctx) => {
    const id = uuidParam(ctx);
    await deleteWorkflow(ctx.state.em, ctx.state.project!.id, id);
    ctx.body = { id, deleted: true };
  });

  router.post('/workflows/:id/steps', g.secret, async (ctx) => {
    const w = await workflowOf(ctx);
    ctx.status = 201;
    ctx.body = toStepDto(await addStep(ctx.state.em, w, body(ctx, createStepSchema)));
  });

  router.patch('/workflows/:id/steps/:stepId', g.secret, async (ctx) => {
    const w = await workflowOf(ctx);
    ctx.body = toStepDto(await updateStep(ctx.state.em, w, uuidParam(ctx, 'stepId'), body(ctx, updateStepSchema)));
  });

  router.delete('/workflows/:id/steps/:stepId', g.secret, async (ctx) => {
    const w = await workflowOf(ctx);
    const stepId = uuidParam(ctx, 'stepId');
    await deleteStep(ctx.state.em, w, stepId, queryValue(ctx, 'splice') === 'true');
    ctx.body = { id: stepId, deleted: true };
  });

  router.post('/workflows/:id/transitions', g.secret, async (ctx) => {
    const w = await workflowOf(ctx);
    ctx.status = 201;
    ctx.body = toTransitionDto(await addTransition(ctx.state.em, w, body(ctx, createTransitionSchema)));
  });

  router.delete('/workflows/:id/transitions/:transitionId', g.secret, async (ctx) => {
    const w = await workflowOf(ctx);
    const id = uuidParam(ctx, 'transitionId');
    await deleteTransition(ctx.state.em, w, id);
    ctx.body = { id, deleted: true };
  });

  /** A manual start runs even a disabled workflow (for trying it out), but only a graph that can run. */
  router.post('/workflows/:id/executions', g.secret, async (ctx) => {
    const w = await workflowOf(ctx);
    const input = body(ctx, startExecutionSchema);
    const [contact] = await sql(ctx.state.em, `SELECT 1 FROM contacts WHERE project_id = ? AND id = ?`, [w.project_id, input.contactId]);
    if (!contact) throw notFound('Contact');
    const { steps, transitions } = await graphOf(ctx.state.em, w.id);
    const problems = graphProblems(steps, transitions);
    if (problems.length) throw badRequest(`This workflow cannot run: ${problems.join('; ')}`, 'WORKFLOW_INVALID', { details: { problems } });
    const x = await startExecution(ctx.state.em, deps.temporal, w, { contactId: input.contactId, context: input.context ?? {} });
    ctx.status = 201;
    ctx.body = toExecutionDto(x!);
  });

  router.get('/workflows/:id/executions', g.secret, async (ctx) => {
    const w = await workflowOf(ctx);
    const status = queryValue(ctx, 'status') || undefined;
    if (status && !(EXECUTION_STATUSES as readonly string[]).includes(status)) {
      throw badRequest(`status must be one of ${EXECUTION_STATUSES.join(', ')}`, 'INVALID_STATUS');
    }
    const limit = Math.min(100, Math.max(1, Number.parseInt(queryValue(ctx, 'limit') ?? '', 10) || 100));
    const offset = Math.max(0, Number.parseInt(queryValue(ctx, 'offset') ?? '', 10) || 0);
    ctx.body = { data: await listExecutions(ctx.state.em, w.id, status as ExecutionStatus | undefined, limit, offset) };
  });

  router.post('/workflows/:id/executions/cancel-all', g.secret, async (ctx) => {
    const w = await workflowOf(ctx);
    const cancelled = await cancelExecutions(ctx.state.em, deps.temporal, w.id);
    ctx.body = { cancelled: cancelled.length };
  });

  router.get('/workflows/:id/executions/:executionId', g.secret, async (ctx) => {
    const w = await workflowOf(ctx);
    const x = await getExecution(ctx.state.em, w.id, uuidParam(ctx, 'executionId'));
    ctx.body = { ...toExecutionDto(x), steps: await executionSteps(ctx.state.em, x.id) };
  });

  router.delete('/workflows/:id/executions/:executionId', g.secret, async (ctx) => {
    const w = await workflowOf(ctx);
    const x = await getExecution(ctx.state.em, w.id, uuidParam(ctx, 'executionId'));
    if (x.status !== 'RUNNING' && x.status !== 'WAITING') throw badRequest(`A ${x.status} execution cannot be cancelled`, 'EXECUTION_FINISHED');
    await cancelExecutions(ctx.state.em, deps.temporal, w.id, x.id);
    ctx.body = toExecutionDto(await getExecution(ctx.state.em, w.id, x.id));
  });
}
