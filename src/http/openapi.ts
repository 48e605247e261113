import fs from 'node:fs';
import path from 'node:path';
import type Router from '@koa/router';
import { z } from 'zod';
import { renderDocsPage } from './docs-page';
import {
  type ContentDoc,
  content,
  endpoint,
  type EndpointSpec,
  endpointSpec,
  type ErrorDoc,
  type MiddlewareDoc,
  middlewareDoc,
  type ResponseDoc,
  type Security,
} from './endpoint';
import { errorEnvelopeSchema, simpleErrorSchema } from './error-envelope';
import { queryDocs } from './query';

export type JsonSchema = Record<string, unknown>;

export interface Operation {
  tags: string[];
  summary: string;
  description?: string;
  operationId: string;
  security: Array<Record<string, string[]>>;
  parameters?: Parameter[];
  requestBody?: { required: boolean; content: Record<string, { schema: JsonSchema }> };
  responses: Record<string, { description: string; content?: Record<string, { schema: JsonSchema }> }>;
  'x-internal'?: boolean;
  'x-undocumented'?: boolean;
}

export interface Parameter {
  name: string;
  in: 'path' | 'query' | 'header';
  required: boolean;
  description?: string;
  schema: JsonSchema;
}

export interface OpenApiDocument {
  openapi: string;
  info: { title: string; version: string; description: string };
  servers: Array<{ url: string }>;
  tags: Array<{ name: string }>;
  paths: Record<string, Record<string, Operation>>;
  components: { securitySchemes: Record<string, JsonSchema>; schemas: Record<string, JsonSchema> };
}

/** One method of one registered route, with what its middleware says about it. */
export interface RouteEntry {
  method: string;
  /** As registered with Koa (`/contacts/:id`). */
  path: string;
  paramNames: string[];
  spec?: EndpointSpec;
  middleware: MiddlewareDoc;
}

/** Every method and path the router answers (HEAD, which Koa adds to each GET, aside). */
export function routeEntries(router: Router): RouteEntry[] {
  const out: RouteEntry[] = [];
  for (const layer of router.stack) {
    if (typeof layer.path !== 'string') continue;
    const spec = layer.stack.map(endpointSpec).find(Boolean);
    const middleware: MiddlewareDoc = Object.assign({}, ...layer.stack.map(middlewareDoc));
    const paramNames = layer.paramNames.map((k) => String(k.name));
    for (const method of layer.methods) {
      if (method !== 'HEAD') out.push({ method, path: layer.path, paramNames, spec, middleware });
    }
  }
  return out;
}

/** What keeps a route out of the document: no `endpoint()` spec, or path parameters it does not declare. */
export function routeProblems(router: Router): string[] {
  const problems: string[] = [];
  for (const r of routeEntries(router)) {
    const route = `${r.method} ${r.path}`;
    if (!r.spec) {
      problems.push(`${route} has no endpoint() schema`);
      continue;
    }
    const declared = Object.keys(r.spec.params ?? {});
    for (const name of r.paramNames) if (!declared.includes(name)) problems.push(`${route} does not declare path parameter ${name}`);
    for (const name of declared) if (!r.paramNames.includes(name)) problems.push(`${route} declares ${name}, which is not in its path`);
  }
  return problems;
}

// Builders describe how they read in the document; transforms alone would read as "string".
function applyQueryDocs({ zodSchema, jsonSchema }: { zodSchema: unknown; jsonSchema: JsonSchema }) {
  const doc = queryDocs.get(zodSchema as z.ZodType);
  if (doc) Object.assign(jsonSchema, doc);
}

/**
 * JSON Schema 2020-12, the dialect of OpenAPI 3.1, as a client writes the value (before transforms
 * and defaults). Responses too: their objects stay open, so a field added later breaks no client.
 */
export function jsonSchemaOf(schema: z.ZodType): JsonSchema {
  const { $schema: _, ...rest } = z.toJSONSchema(schema, {
    target: 'draft-2020-12',
    io: 'input',
    unrepresentable: 'any',
    override: applyQueryDocs,
  }) as JsonSchema;
  return rest;
}

const SECURITY_SCHEMES: Record<Security, JsonSchema> = {
  secretKey: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'sk_…',
    description: 'The project’s secret key (`sk_`), as `Authorization: Bearer <key>`. Server-side only.',
  },
  publicKey: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'pk_…',
    description: 'The project’s public key (`pk_`), as `Authorization: Bearer <key>`. Safe in browsers; POST /v1/track only.',
  },
  session: {
    type: 'apiKey',
    in: 'cookie',
    name: 'token',
    description: 'The dashboard session: a JWT cookie set by /auth/signup and /auth/login (also accepted as a Bearer token).',
  },
};

const ERROR_REF = { $ref: '#/components/schemas/Error' };
const SIMPLE_ERROR_REF = { $ref: '#/components/schemas/SimpleError' };

const openApiPath = (koaPath: string) => koaPath.replace(/:(\w+)/g, '{$1}');

function operationId(method: string, path: string): string {
  const words = path.split(/[^A-Za-z0-9]+/).filter(Boolean);
  return [method.toLowerCase(), ...words.map((w) => w[0].toUpperCase() + w.slice(1))].join('');
}

function responseOf(doc: ResponseDoc): Operation['responses'][string] {
  if (typeof doc === 'string') return { description: doc };
  if (doc instanceof z.ZodType) {
    return { description: doc.description ?? 'Success', content: { 'application/json': { schema: jsonSchemaOf(doc) } } };
  }
  const c = doc as ContentDoc;
  if (!c.contentType) return { description: c.description };
  return { description: c.description, content: { [c.contentType]: { schema: c.schema ? jsonSchemaOf(c.schema) : {} } } };
}

function errorOf(doc: string | ErrorDoc): Operation['responses'][string] {
  const simple = typeof doc !== 'string';
  return { description: simple ? doc.description : doc, content: { 'application/json': { schema: simple ? SIMPLE_ERROR_REF : ERROR_REF } } };
}

/** The failures every route behind a guard, or with a schema, can answer. */
function impliedErrors(spec: EndpointSpec, mw: MiddlewareDoc): Record<number, string> {
  const errors: Record<number, string> = {};
  if (spec.body) errors[400] = 'The body is not valid JSON (INVALID_JSON)';
  if (mw.idempotencyKey) errors[400] = 'The body is not valid JSON (INVALID_JSON), or the Idempotency-Key is invalid (INVALID_IDEMPOTENCY_KEY)';
  if (mw.security)
    errors[401] =
      mw.security === 'session' ? 'Not logged in, or the session expired' : 'Missing or invalid API key, or a key of the wrong kind (INVALID_API_KEY)';
  if (mw.security === 'secretKey' || mw.security === 'publicKey') errors[403] = 'The project is disabled (PROJECT_DISABLED)';
  if (mw.idempotencyKey) errors[409] = 'This Idempotency-Key was already used (IDEMPOTENCY_KEY_REUSED)';
  const uuidParams = Object.values(spec.params ?? {}).some((s) => jsonSchemaOf(s).format === 'uuid');
  if (spec.body || uuidParams)
    errors[422] =
      `Validation failed (VALIDATION_ERROR): ` + `${[spec.body && 'the body', uuidParams && 'a path id that is not a UUID'].filter(Boolean).join(', or ')}`;
  if (mw.rateLimited) errors[429] = 'Rate limit exceeded';
  return errors;
}

function parametersOf(r: RouteEntry, spec: EndpointSpec): Parameter[] {
  const params: Parameter[] = [];
  for (const name of r.paramNames) {
    const schema = spec.params?.[name];
    const json = schema ? jsonSchemaOf(schema) : { type: 'string' };
    const { description, ...rest } = json;
    params.push({ name, in: 'path', required: true, ...(description ? { description: String(description) } : {}), schema: rest });
  }
  if (spec.query) {
    const json = jsonSchemaOf(spec.query);
    const required = new Set((json.required as string[] | undefined) ?? []);
    for (const [name, prop] of Object.entries((json.properties ?? {}) as Record<string, JsonSchema>)) {
      const { description, ...rest } = prop;
      params.push({ name, in: 'query', required: required.has(name), ...(description ? { description: String(description) } : {}), schema: rest });
    }
  }
  const headers: Record<string, string> = { ...spec.headers };
  if (r.middleware.idempotencyKey) {
    headers['Idempotency-Key'] ??= 'Makes a retry safe: 1-255 printable ASCII characters, scoped to the project, kept 24 hours by default.';
  }
  for (const [name, description] of Object.entries(headers)) params.push({ name, in: 'header', required: false, description, schema: { type: 'string' } });
  return params;
}

function operationOf(r: RouteEntry): Operation {
  const spec = r.spec;
  const id = operationId(r.method, r.path);
  if (!spec) {
    // Listed all the same, so the docs page names every route; the test fails on these.
    return {
      tags: ['Undocumented'],
      summary: '(no endpoint() schema)',
      operationId: id,
      security: [],
      responses: { default: { description: 'Not described' } },
      'x-undocumented': true,
    };
  }
  const op: Operation = {
    tags: [spec.tag],
    summary: spec.summary,
    ...(spec.description ? { description: spec.description } : {}),
    operationId: id,
    security: r.middleware.security ? [{ [r.middleware.security]: [] }] : [],
    responses: {},
    ...(spec.internal ? { 'x-internal': true } : {}),
  };
  const parameters = parametersOf(r, spec);
  if (parameters.length) op.parameters = parameters;
  if (spec.body) {
    const schema = jsonSchemaOf(spec.body);
    const types = spec.bodyContentTypes ?? ['application/json'];
    op.requestBody = { required: Array.isArray(schema.required) && schema.required.length > 0, content: Object.fromEntries(types.map((t) => [t, { schema }])) };
  } else if (spec.upload) {
    const { field, description, fields } = spec.upload;
    const others = fields ? ((jsonSchemaOf(fields).properties ?? {}) as Record<string, unknown>) : {};
    op.requestBody = {
      required: true,
      content: {
        'multipart/form-data': {
          schema: { type: 'object', properties: { [field]: { type: 'string', format: 'binary', description }, ...others }, required: [field] },
        },
      },
    };
  }
  for (const [status, doc] of Object.entries(spec.responses)) op.responses[status] = responseOf(doc);
  const errors: Record<number, string | ErrorDoc | null> = { ...impliedErrors(spec, r.middleware), ...spec.errors };
  for (const [status, doc] of Object.entries(errors)) if (doc) op.responses[status] = errorOf(doc);
  return op;
}

/** The OpenAPI 3.1 document of every route the router answers, from their `endpoint()` specs. */
export function openApiDocument(router: Router, opts: { serverUrl: string; version: string }): OpenApiDocument {
  const paths: OpenApiDocument['paths'] = {};
  const tags: string[] = [];
  for (const r of routeEntries(router)) {
    const op = operationOf(r);
    if (!tags.includes(op.tags[0])) tags.push(op.tags[0]);
    (paths[openApiPath(r.path)] ??= {})[r.method.toLowerCase()] = op;
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'postbox',
      version: opts.version,
      description:
        'Email delivery and audience API. API-key endpoints take `Authorization: Bearer <key>`: the public key (`pk_`) ' +
        'on POST /v1/track and POST /v1/subscribe only, the secret key (`sk_`) everywhere else. Dashboard endpoints use the session cookie. ' +
        'Operations marked internal are not for API clients.',
    },
    servers: [{ url: opts.serverUrl }],
    tags: tags.map((name) => ({ name })),
    paths,
    components: {
      securitySchemes: SECURITY_SCHEMES,
      schemas: { Error: jsonSchemaOf(errorEnvelopeSchema), SimpleError: jsonSchemaOf(simpleErrorSchema) },
    },
  };
}

// src/http from the sources, dist/src/http when built.
const ROOT = path.resolve(__dirname, __filename.endsWith('.ts') ? '../..' : '../../..');

/** GET /openapi.json and GET /docs, built from the router on first request (every route is registered by then). */
export function openApiRoutes(router: Router, settings: { serverUrl: string }): void {
  const opts = { ...settings, version: (JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version };
  let doc: OpenApiDocument | undefined;
  let page: string | undefined;
  const documentOf = () => (doc ??= openApiDocument(router, opts));

  router.get(
    '/openapi.json',
    endpoint({ tag: 'Documentation', summary: 'This API as an OpenAPI 3.1 document', responses: { 200: 'The OpenAPI document' } }, (ctx) => {
      ctx.body = documentOf();
    }),
  );

  router.get(
    '/docs',
    endpoint(
      { tag: 'Documentation', summary: 'This API as a readable page', responses: { 200: content('text/html', 'Every endpoint, grouped by tag') } },
      (ctx) => {
        ctx.type = 'text/html';
        // Self-contained: no scripts at all, inline styles only.
        ctx.set('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'");
        ctx.body = page ??= renderDocsPage(documentOf());
      },
    ),
  );
}
