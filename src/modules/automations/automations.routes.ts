import type Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import type { WorkflowStarter } from '../workflow-starter';
import { endpoint } from '../../http/endpoint';
import type { Guards } from '../../http/guards';
import { deletedResponse } from '../../http/responses';
import { uuidPath } from '../../validation';
import { cancelExecution, cancelExecutions, executionSteps, getExecution, listExecutions, startExecutionByHand, toExecutionDto } from './executions.service';
import {
  conditionFieldsResponse,
  createStepSchema,
  createTransitionSchema,
  createAutomationSchema,
  deleteStepQuery,
  executionDetailResponse,
  executionListQuery,
  executionResponse,
  startExecutionSchema,
  stepResponse,
  transitionResponse,
  updateStepSchema,
  updateAutomationSchema,
  automationListResponse,
  automationResponse,
} from './automations.schemas';
import {
  addStep,
  addTransition,
  conditionFields,
  createAutomation,
  deleteStep,
  deleteTransition,
  deleteAutomation,
  getAutomation,
  listAutomations,
  toStepDto,
  toTransitionDto,
  updateStep,
  updateAutomation,
  automationDto,
} from './automations.service';

const tag = 'Workflows';
const NOT_FOUND = { 404: 'No such workflow in the project' };
const STEP_ERRORS = { 400: 'The config does not fit the step type, or the change would break the graph', 404: 'No such workflow or step' };

export function automationRoutes(router: Router, g: Guards, deps: { temporal: WorkflowStarter; allowPrivateWebhooks: boolean }): void {
  const automationOf = (ctx: Context, id: string) => getAutomation(ctx.state.em, ctx.state.project!.id, id);

  router.get(
    '/workflows',
    g.secret,
    endpoint(
      { tag, summary: 'List workflows with their execution counts', responses: { 200: automationListResponse.describe('Every workflow of the project') } },
      async (ctx) => {
        ctx.body = { data: await listAutomations(ctx.state.em, ctx.state.project!.id) };
      },
    ),
  );

  router.get(
    '/workflows/fields',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Fields usable in CONDITION steps, with their operators',
        responses: { 200: conditionFieldsResponse.describe('Contact, data, event and workflow fields') },
      },
      async (ctx) => {
        ctx.body = await conditionFields(ctx.state.em, ctx.state.project!.id);
      },
    ),
  );

  router.post(
    '/workflows',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Create a workflow (EVENT-triggered, disabled)',
        description: 'Give the trigger event as `triggerConfig.eventName` (or `eventName`). The workflow starts with its TRIGGER step.',
        body: createAutomationSchema,
        responses: { 201: automationResponse.describe('The new workflow') },
      },
      async (ctx, input) => {
        const w = await createAutomation(ctx.state.em, ctx.state.project!.id, input.body());
        ctx.status = 201;
        ctx.body = await automationDto(ctx.state.em, w);
      },
    ),
  );

  router.get(
    '/workflows/:id',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Get a workflow with its steps and transitions',
        params: { id: uuidPath },
        responses: { 200: automationResponse.describe('The workflow') },
        errors: NOT_FOUND,
      },
      async (ctx, input) => {
        ctx.body = await automationDto(ctx.state.em, await automationOf(ctx, input.param('id')));
      },
    ),
  );

  router.patch(
    '/workflows/:id',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Update a workflow’s name, trigger, enabled or allowReentry',
        params: { id: uuidPath },
        body: updateAutomationSchema,
        responses: { 200: automationResponse.describe('The updated workflow') },
        errors: { ...NOT_FOUND, 400: 'Enabling a workflow whose graph cannot run (WORKFLOW_INVALID)' },
      },
      async (ctx, input) => {
        const w = await updateAutomation(ctx.state.em, ctx.state.project!.id, input.param('id'), input.body());
        ctx.body = await automationDto(ctx.state.em, w);
      },
    ),
  );

  router.delete(
    '/workflows/:id',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Delete a workflow',
        params: { id: uuidPath },
        responses: { 200: deletedResponse.describe('Deleted') },
        errors: { ...NOT_FOUND, 409: 'It has active executions: cancel them first (WORKFLOW_ACTIVE)' },
      },
      async (ctx, input) => {
        const id = input.param('id');
        await deleteAutomation(ctx.state.em, ctx.state.project!.id, id);
        ctx.body = { id, deleted: true };
      },
    ),
  );

  router.post(
    '/workflows/:id/steps',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Add a step',
        params: { id: uuidPath },
        body: createStepSchema,
        responses: { 201: stepResponse.describe('The new step') },
        errors: STEP_ERRORS,
      },
      async (ctx, input) => {
        const w = await automationOf(ctx, input.param('id'));
        ctx.status = 201;
        ctx.body = toStepDto(await addStep(ctx.state.em, w, input.body(), deps));
      },
    ),
  );

  router.patch(
    '/workflows/:id/steps/:stepId',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Update a step’s name, config or position',
        params: { id: uuidPath, stepId: uuidPath },
        body: updateStepSchema,
        responses: { 200: stepResponse.describe('The updated step') },
        errors: STEP_ERRORS,
      },
      async (ctx, input) => {
        const w = await automationOf(ctx, input.param('id'));
        ctx.body = toStepDto(await updateStep(ctx.state.em, w, input.param('stepId'), input.body(), deps));
      },
    ),
  );

  router.delete(
    '/workflows/:id/steps/:stepId',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Delete a step',
        params: { id: uuidPath, stepId: uuidPath },
        query: deleteStepQuery,
        responses: { 200: deletedResponse.describe('Deleted') },
        errors: STEP_ERRORS,
      },
      async (ctx, input) => {
        const w = await automationOf(ctx, input.param('id'));
        const stepId = input.param('stepId');
        await deleteStep(ctx.state.em, w, stepId, input.query().splice);
        ctx.body = { id: stepId, deleted: true };
      },
    ),
  );

  router.post(
    '/workflows/:id/transitions',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Connect two steps (branch yes or no from a CONDITION step)',
        params: { id: uuidPath },
        body: createTransitionSchema,
        responses: { 201: transitionResponse.describe('The new transition') },
        errors: { ...STEP_ERRORS, 409: 'The step already has a transition for this branch or outcome (TRANSITION_EXISTS)' },
      },
      async (ctx, input) => {
        const w = await automationOf(ctx, input.param('id'));
        ctx.status = 201;
        ctx.body = toTransitionDto(await addTransition(ctx.state.em, w, input.body()));
      },
    ),
  );

  router.delete(
    '/workflows/:id/transitions/:transitionId',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Delete a transition',
        params: { id: uuidPath, transitionId: uuidPath },
        responses: { 200: deletedResponse.describe('Deleted') },
        errors: { 404: 'No such workflow or transition' },
      },
      async (ctx, input) => {
        const w = await automationOf(ctx, input.param('id'));
        const id = input.param('transitionId');
        await deleteTransition(ctx.state.em, w, id);
        ctx.body = { id, deleted: true };
      },
    ),
  );

  router.post(
    '/workflows/:id/executions',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Start an execution for a contact',
        description: 'Runs even a disabled workflow (for trying it out), but only a graph that can run. `context` holds per-execution variables.',
        params: { id: uuidPath },
        body: startExecutionSchema,
        responses: { 201: executionResponse.describe('The new execution') },
        errors: { 400: 'The workflow’s graph cannot run (WORKFLOW_INVALID)', 404: 'No such workflow or contact' },
      },
      async (ctx, input) => {
        const w = await automationOf(ctx, input.param('id'));
        const { contactId, context } = input.body();
        const x = await startExecutionByHand(ctx.state.em, deps.temporal, w, contactId, context ?? {});
        ctx.status = 201;
        ctx.body = toExecutionDto(x);
      },
    ),
  );

  router.get(
    '/workflows/:id/executions',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'List executions, newest first',
        params: { id: uuidPath },
        query: executionListQuery,
        responses: { 200: z.object({ data: z.array(executionResponse) }).describe('A page of executions') },
        errors: { ...NOT_FOUND, 400: 'status is not an execution status (INVALID_STATUS)' },
      },
      async (ctx, input) => {
        const w = await automationOf(ctx, input.param('id'));
        const { status, limit, offset } = input.query();
        ctx.body = { data: await listExecutions(ctx.state.em, w.id, status, limit, offset) };
      },
    ),
  );

  router.post(
    '/workflows/:id/executions/cancel-all',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Cancel every running or waiting execution',
        params: { id: uuidPath },
        responses: { 200: z.object({ cancelled: z.number().int() }).describe('How many were cancelled') },
        errors: NOT_FOUND,
      },
      async (ctx, input) => {
        const w = await automationOf(ctx, input.param('id'));
        const cancelled = await cancelExecutions(ctx.state.em, deps.temporal, w.id);
        ctx.body = { cancelled: cancelled.length };
      },
    ),
  );

  router.get(
    '/workflows/:id/executions/:executionId',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Get an execution with the steps it ran',
        params: { id: uuidPath, executionId: uuidPath },
        responses: { 200: executionDetailResponse.describe('The execution') },
        errors: { 404: 'No such workflow or execution' },
      },
      async (ctx, input) => {
        const w = await automationOf(ctx, input.param('id'));
        const x = await getExecution(ctx.state.em, w.id, input.param('executionId'));
        ctx.body = { ...toExecutionDto(x), steps: await executionSteps(ctx.state.em, x.id) };
      },
    ),
  );

  router.delete(
    '/workflows/:id/executions/:executionId',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Cancel a running or waiting execution',
        params: { id: uuidPath, executionId: uuidPath },
        responses: { 200: executionResponse.describe('The cancelled execution') },
        errors: { 400: 'The execution has finished (EXECUTION_FINISHED)', 404: 'No such workflow or execution' },
      },
      async (ctx, input) => {
        const w = await automationOf(ctx, input.param('id'));
        ctx.body = toExecutionDto(await cancelExecution(ctx.state.em, deps.temporal, w.id, input.param('executionId')));
      },
    ),
  );
}
