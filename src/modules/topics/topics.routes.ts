import type Router from '@koa/router';
import { endpoint } from '../../http/endpoint';
import type { Guards } from '../../http/guards';
import { deletedResponse } from '../../http/responses';
import { uuidPath } from '../../validation';
import { createTopicSchema, topicListQuery, topicListResponse, topicResponse, updateTopicSchema } from './topics.schemas';
import { createTopic, deleteTopic, getTopic, listTopics, toTopicDto, updateTopic } from './topics.service';

const tag = 'Topics';
const NOT_FOUND = { 404: 'No such topic in the project' };
const NAME_TAKEN = { 409: 'Another topic of the project has that name (TOPIC_EXISTS)' };

export function topicRoutes(router: Router, g: Guards): void {
  router.post(
    '/topics',
    g.secret,
    endpoint(
      { tag, summary: 'Create a topic', body: createTopicSchema, responses: { 201: topicResponse.describe('The new topic') }, errors: NAME_TAKEN },
      async (ctx, input) => {
        ctx.status = 201;
        ctx.body = toTopicDto(await createTopic(ctx.state.em, ctx.state.project!.id, input.body()));
      },
    ),
  );

  router.get(
    '/topics',
    g.secret,
    endpoint(
      { tag, summary: 'List topics (offset pagination)', query: topicListQuery, responses: { 200: topicListResponse.describe('A page of topics') } },
      async (ctx, input) => {
        ctx.body = await listTopics(ctx.state.em, ctx.state.project!.id, input.query());
      },
    ),
  );

  router.get(
    '/topics/:id',
    g.secret,
    endpoint(
      { tag, summary: 'Get a topic', params: { id: uuidPath }, responses: { 200: topicResponse.describe('The topic') }, errors: NOT_FOUND },
      async (ctx, input) => {
        ctx.body = toTopicDto(await getTopic(ctx.state.em, ctx.state.project!.id, input.param('id')));
      },
    ),
  );

  router.patch(
    '/topics/:id',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Update a topic',
        params: { id: uuidPath },
        body: updateTopicSchema,
        responses: { 200: topicResponse.describe('The updated topic') },
        errors: { ...NOT_FOUND, ...NAME_TAKEN },
      },
      async (ctx, input) => {
        ctx.body = toTopicDto(await updateTopic(ctx.state.em, ctx.state.project!.id, input.param('id'), input.body()));
      },
    ),
  );

  router.delete(
    '/topics/:id',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Delete a topic and every contact’s choice for it',
        params: { id: uuidPath },
        responses: { 200: deletedResponse.describe('Deleted') },
        errors: { ...NOT_FOUND, 409: 'Unsent campaigns or workflow steps send for the topic (TOPIC_IN_USE, listed in details)' },
      },
      async (ctx, input) => {
        const id = input.param('id');
        await deleteTopic(ctx.state.em, ctx.state.project!.id, id);
        ctx.body = { id, deleted: true };
      },
    ),
  );
}
