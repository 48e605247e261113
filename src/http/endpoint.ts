import type { RouterContext } from '@koa/router';
import compose from 'koa-compose';
import type { Middleware } from 'koa';
import { z } from 'zod';
import { AppError, issuesToFieldErrors, validationError } from '../errors';
import { firstValues } from './query';
import { parse } from '../validation';

/**
 * How a route says what it accepts and returns: the same zod schemas validate the request and
 * write the OpenAPI document (/openapi.json, /docs), so the two cannot drift apart.
 *
 *   router.patch('/widgets/:id', g.secret, endpoint({
 *     tag: 'Widgets',
 *     summary: 'Update a widget',
 *     params: { id: uuidPath },                    // every `:name` in the path
 *     query: z.object({ dryRun: queryFlag() }),    // optional; builders in http/query.ts
 *     body: updateWidgetSchema,                    // optional; JSON
 *     responses: { 200: widgetResponse.describe('The widget') },
 *     errors: { 404: 'No such widget in the project' },
 *   }, async (ctx, input) => {
 *     const id = input.param('id');               // 422 naming the parameter when invalid
 *     ctx.body = await updateWidget(ctx.state.em, ctx.state.project!.id, id, input.body());
 *   }));
 *
 * Each part is validated when the handler first asks for it, so checks that answer first (a 404
 * lookup, a 400 the spec gives precedence) keep their place; a handler reads every part it declares.
 * Who may call the route comes from its guard (g.secret, g.session, ...), which says so through
 * `documented`. test/unit/openapi.test.ts fails on a route registered without `endpoint()` or with
 * an undeclared path parameter.
 */
export function endpoint<
  P extends ParamShape | undefined = undefined,
  Q extends z.ZodObject | undefined = undefined,
  B extends z.ZodType | undefined = undefined,
>(spec: EndpointSpec<P, Q, B>, handler: (ctx: RouterContext, input: EndpointInput<P, Q, B>) => unknown): Middleware {
  // One object schema per parameter, so its issues carry the parameter's name as their path.
  const paramSchemas = new Map(Object.entries(spec.params ?? {}).map(([name, schema]) => [name, z.object({ [name]: schema as z.ZodType })]));
  const run = async (ctx: RouterContext) => {
    const seen = new Map<string, unknown>();
    const once = (key: string, read: () => unknown) => {
      if (!seen.has(key)) seen.set(key, read());
      return seen.get(key);
    };
    const input = {
      param: (name: string) =>
        once(`param:${name}`, () => {
          const schema = paramSchemas.get(name);
          if (!schema) throw new Error(`path parameter ${name} is read but not declared in endpoint() params`);
          const result = schema.safeParse({ [name]: String(ctx.params?.[name] ?? '') });
          if (!result.success) throw validationError(result.error.issues);
          return (result.data as Record<string, unknown>)[name];
        }),
      query: () =>
        once('query', () => {
          if (!spec.query) throw new Error('the query is read but no endpoint() query schema is declared');
          const result = spec.query.safeParse(firstValues(ctx.query, spec.query.shape as Record<string, z.ZodType>), { reportInput: true });
          if (result.success) return result.data;
          // Query builders carry the exact error their parameter answers with; any other failure is the
          // spec's 400 for invalid parameters, naming them as a body's 422 does.
          const carried = result.error.issues[0]?.code === 'custom' ? result.error.issues[0].params?.error : undefined;
          if (carried instanceof AppError) throw carried;
          const errors = issuesToFieldErrors(result.error.issues);
          throw new AppError(400, 'INVALID_PARAMETER', `Invalid query parameter ${errors[0].field}: ${errors[0].message}`, { errors });
        }),
      body: () =>
        once('body', () => {
          if (!spec.body) throw new Error('the body is read but no endpoint() body schema is declared');
          return parse(spec.body, ctx.request.body ?? {});
        }),
    };
    await handler(ctx, input as unknown as EndpointInput<P, Q, B>);
  };
  return Object.assign(run, { [ENDPOINT]: spec as EndpointSpec }) as unknown as Middleware;
}

type ParamShape = Record<string, z.ZodType>;

export interface EndpointSpec<
  P extends ParamShape | undefined = ParamShape | undefined,
  Q extends z.ZodObject | undefined = z.ZodObject | undefined,
  B extends z.ZodType | undefined = z.ZodType | undefined,
> {
  /** The group the docs page lists the route under: usually the resource. */
  tag: string;
  summary: string;
  description?: string;
  /** Not for API clients: webhooks from providers, links in sent mail, health and dev tools. */
  internal?: boolean;
  /** One schema per `:name` in the path (`uuidPath` for ids: 422 when not a UUID). */
  params?: P;
  /** The query string, first value of each parameter; see http/query.ts for lenient builders. */
  query?: Q;
  /** The JSON body (`parse` rules: 422 VALIDATION_ERROR with dot-path fields). */
  body?: B;
  /** How the body may be sent, when not (only) as JSON. */
  bodyContentTypes?: string[];
  /** A multipart/form-data body holding one file (read with `withUploadedFile(ctx, field, ...)`), and the text fields beside it. */
  upload?: { field: string; description: string; fields?: z.ZodObject };
  /** Successes by status: a description, a zod schema (`.describe()` gives its description), or `content(...)`. */
  responses: Record<number, ResponseDoc>;
  /** Route-specific failures by status, beyond those its guard and schemas imply (401, 403, 422, 429, ...); null: never answered. */
  errors?: Record<number, string | ErrorDoc | null>;
  /** Request headers the route reads, by name. */
  headers?: Record<string, string>;
}

export type ResponseDoc = string | z.ZodType | ContentDoc;
export interface ContentDoc {
  description: string;
  contentType: string;
  schema?: z.ZodType;
}
export interface ErrorDoc {
  description: string;
  /** Answered in the spec's simple `{ error }` form rather than the envelope. */
  simple: true;
}

/** A non-JSON success: an HTML page, an image, a redirect (`contentType` empty for no body). */
export const content = (contentType: string, description: string, schema?: z.ZodType): ContentDoc => ({ contentType, description, schema });
/** A failure answered as `{ error: <message> }` (contacts, templates and segments on 400). */
export const simpleError = (description: string): ErrorDoc => ({ description, simple: true });

export interface EndpointInput<P, Q, B> {
  /** The path parameter `name`, checked by its schema: 422 VALIDATION_ERROR naming it when invalid. */
  param<K extends keyof P & string>(name: K): P[K] extends z.ZodType ? z.output<P[K]> : never;
  /** The query string checked by its schema; a builder's own error (often 400) when a value is unusable. */
  query(): Q extends z.ZodType ? z.output<Q> : never;
  /** The JSON body checked by its schema: 422 VALIDATION_ERROR with dot-path fields. */
  body(): B extends z.ZodType ? z.output<B> : never;
}

/** Who may call a route. */
export type Security = 'secretKey' | 'publicKey' | 'session';

/** What a guard (or other shared middleware) implies for every route behind it. */
export interface MiddlewareDoc {
  security?: Security;
  rateLimited?: boolean;
  /** Accepts the `Idempotency-Key` header. */
  idempotencyKey?: boolean;
}

const ENDPOINT = Symbol('endpoint');
const MIDDLEWARE_DOC = Symbol('middleware-doc');

/** Marks `mw` with what it implies for the OpenAPI document (auth scheme, rate limit, ...). */
export function documented<M extends (...args: never[]) => unknown>(mw: M, doc: MiddlewareDoc): M {
  return Object.assign(mw, { [MIDDLEWARE_DOC]: { ...middlewareDoc(mw), ...doc } });
}

/** `koa-compose`, keeping what the parts say of themselves for the document. */
export function chain(...mw: Middleware[]): Middleware {
  return documented(compose(mw) as Middleware, Object.assign({}, ...mw.map(middlewareDoc)));
}

export function middlewareDoc(mw: unknown): MiddlewareDoc {
  return (mw as { [MIDDLEWARE_DOC]?: MiddlewareDoc })?.[MIDDLEWARE_DOC] ?? {};
}

export function endpointSpec(mw: unknown): EndpointSpec | undefined {
  return (mw as { [ENDPOINT]?: EndpointSpec })?.[ENDPOINT];
}
