import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type Router from '@koa/router';
import { loadConfig } from '../../src/config';
import { type ApiRouteDeps, apiRoutes } from '../../src/api-routes';
import { type AppDeps, createApp } from '../../src/http/app';
import { type OpenApiDocument, routeEntries, routeProblems } from '../../src/http/openapi';
import { createLogger } from '../../src/log';
import type { Orm } from '../../src/db/orm';
import { Metrics } from '../../src/metrics';

/**
 * The real app's router, built with inert dependencies: registering routes touches none of them,
 * and /openapi.json and /docs never reach the database.
 */
const config = loadConfig({ PUBLIC_URL: 'https://mail.example.com' });
const log = createLogger('silent');
const routes = apiRoutes({ config, log, jwtSecret: 'x'.repeat(32) } as unknown as ApiRouteDeps);
const app = createApp({ config, log, jwtSecret: 'x'.repeat(32), health: [], metrics: new Metrics({} as Orm), routes } as unknown as AppDeps);
const router = (app.middleware.find((mw) => 'router' in mw) as unknown as { router: Router }).router;

let server: http.Server;
let base: string;
beforeAll(async () => {
  server = http.createServer(app.callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const openApiPath = (p: string) => p.replace(/:(\w+)/g, '{$1}');

test('every registered route declares its schema with endpoint()', () => {
  expect(routeEntries(router).length).toBeGreaterThan(100);
  // Names each route that lacks one, or a path parameter it does not declare.
  expect(routeProblems(router)).toEqual([]);
});

describe('GET /openapi.json', () => {
  let doc: OpenApiDocument;
  beforeAll(async () => {
    const res = await fetch(`${base}/openapi.json`);
    expect(res.status).toBe(200);
    doc = (await res.json()) as OpenApiDocument;
  });

  test('is an OpenAPI 3.1 document with every route of the router', () => {
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
    expect(doc.info).toEqual(expect.objectContaining({ title: 'postbox', version: expect.any(String) }));
    expect(doc.servers).toEqual([{ url: 'https://mail.example.com' }]);
    for (const r of routeEntries(router)) {
      const op = doc.paths[openApiPath(r.path)]?.[r.method.toLowerCase()];
      expect({ route: `${r.method} ${r.path}`, documented: Boolean(op && !op['x-undocumented']) }).toEqual({
        route: `${r.method} ${r.path}`,
        documented: true,
      });
      expect(op.summary).toBeTruthy();
      expect(Object.keys(op.responses).length).toBeGreaterThan(0);
    }
    const ops = Object.values(doc.paths).flatMap((methods) => Object.values(methods));
    expect(ops.length).toBe(routeEntries(router).length);
    const ids = ops.map((op) => op.operationId);
    expect(new Set(ids).size).toBe(ids.length);
  });

  test('every $ref points at a component, and no schema carries its own $schema', () => {
    const text = JSON.stringify(doc);
    const refs = [...text.matchAll(/"\$ref":"([^"]+)"/g)].map((m) => m[1]);
    expect(refs.length).toBeGreaterThan(0);
    for (const ref of new Set(refs)) {
      expect(ref).toMatch(/^#\/components\/schemas\//);
      expect(doc.components.schemas[ref.split('/').pop()!]).toBeDefined();
    }
    expect(text).not.toContain('"$schema"');
  });

  test('templates: previews, test sends and the body format', () => {
    const resolve = (s: any): any => (s?.$ref ? doc.components.schemas[s.$ref.split('/').pop()] : s);
    const bodyOf = (path: string, method: string) => resolve((doc.paths[path][method].requestBody!.content['application/json'] as any).schema);
    for (const path of ['/templates/{id}/preview', '/campaigns/{id}/preview']) {
      expect(Object.keys(bodyOf(path, 'post').properties).sort()).toEqual(['contactId', 'data']);
      const ok = resolve((doc.paths[path].post.responses['200'] as any).content['application/json'].schema);
      expect(Object.keys(ok.properties).sort()).toEqual(['html', 'subject', 'text']);
      expect(doc.paths[path].post.responses['404']).toBeDefined();
    }
    expect(Object.keys(bodyOf('/campaigns/{id}/test', 'post').properties).sort()).toEqual(['contactId', 'email', 'emails']);
    expect(bodyOf('/campaigns/{id}/test', 'post').properties.emails).toMatchObject({ type: 'array', minItems: 1, maxItems: 50 });
    for (const [path, method] of [
      ['/templates', 'post'],
      ['/templates/{id}', 'patch'],
      ['/campaigns', 'post'],
      ['/campaigns/{id}', 'put'],
    ]) {
      expect(bodyOf(path, method).properties.format).toMatchObject({ enum: ['html', 'mjml'] });
    }
  });

  test('POST /v1/send: the body schema of the validator, the secret key, and Idempotency-Key', () => {
    const op = doc.paths['/v1/send'].post;
    const body = op.requestBody!.content['application/json'].schema as any;
    expect(body.type).toBe('object');
    expect(Object.keys(body.properties)).toEqual(expect.arrayContaining(['to', 'subject', 'body', 'template', 'from', 'attachments', 'headers']));
    expect(body.required).toEqual(['to']);
    expect(body.properties.subject).toEqual(expect.objectContaining({ type: 'string', minLength: 1, maxLength: 998 }));
    expect(body.properties.attachments).toEqual(expect.objectContaining({ type: 'array', maxItems: 10 }));
    expect(op.security).toEqual([{ secretKey: [] }]);
    expect(op.parameters).toEqual(expect.arrayContaining([expect.objectContaining({ name: 'Idempotency-Key', in: 'header' })]));
    expect(op.responses['422'].content!['application/json'].schema).toEqual({ $ref: '#/components/schemas/Error' });
    expect((op.responses['200'].content!['application/json'].schema as any).properties.data.properties.emails.type).toBe('array');
  });

  test('security follows each route’s guard', () => {
    expect(doc.paths['/v1/track'].post.security).toEqual([{ publicKey: [] }]);
    expect(doc.paths['/users/@me'].get.security).toEqual([{ session: [] }]);
    expect(doc.paths['/auth/login'].post.security).toEqual([]);
    expect(doc.paths['/health'].get.security).toEqual([]);
    expect(Object.keys(doc.components.securitySchemes).sort()).toEqual(['publicKey', 'secretKey', 'session']);
    const used = new Set(Object.values(doc.paths).flatMap((m) => Object.values(m).flatMap((op) => op.security.flatMap(Object.keys))));
    for (const scheme of used) expect(doc.components.securitySchemes[scheme]).toBeDefined();
  });

  test('path and query parameters are described from their schemas', () => {
    const get = doc.paths['/contacts/{id}'].get;
    expect(get.parameters).toEqual([expect.objectContaining({ name: 'id', in: 'path', required: true, schema: expect.objectContaining({ format: 'uuid' }) })]);
    const list = doc.paths['/contacts'].get.parameters!;
    expect(list.find((p) => p.name === 'limit')).toEqual(
      expect.objectContaining({ in: 'query', required: false, schema: expect.objectContaining({ type: 'integer', default: 20, minimum: 1, maximum: 100 }) }),
    );
    expect(doc.paths['/campaigns'].get.parameters!.find((p) => p.name === 'status')!.schema.enum).toEqual([
      'DRAFT',
      'SCHEDULED',
      'SENDING',
      'TESTING',
      'SENT',
      'CANCELLED',
    ]);
  });

  test('campaigns: abTest and localTime in the body and the answer; POST /campaigns/{id}/winner', () => {
    const body = doc.paths['/campaigns'].post.requestBody!.content['application/json'].schema as any;
    const abTest = body.properties.abTest.anyOf.find((s: any) => s.type === 'object');
    expect(abTest.properties.variants).toEqual(expect.objectContaining({ type: 'array', minItems: 2, maxItems: 4 }));
    expect(abTest.properties.winnerCriteria.enum).toEqual(['opens', 'clicks', 'manual']);
    const localTime = body.properties.localTime.anyOf.find((s: any) => s.type === 'object');
    expect(localTime.properties.pastPolicy.enum).toEqual(['send_now', 'skip', 'next_day']);
    const answer = doc.paths['/campaigns/{id}'].get.responses['200'].content!['application/json'].schema as any;
    const shown = answer.properties.abTest.anyOf.find((s: any) => s.type === 'object');
    expect(Object.keys(shown.properties)).toEqual(expect.arrayContaining(['variants', 'winnerVariantId', 'phase']));
    expect(Object.keys(shown.properties.variants.items.properties)).toEqual(expect.arrayContaining(['id', 'sent', 'opened', 'clicked']));
    expect(answer.properties.localTime.anyOf.find((s: any) => s.type === 'object').properties.waiting.type).toBe('array');
    const winner = doc.paths['/campaigns/{id}/winner'].post;
    expect((winner.requestBody!.content['application/json'].schema as any).properties.variantId.enum).toEqual(['A', 'B', 'C', 'D']);
    expect(Object.keys(winner.responses)).toEqual(expect.arrayContaining(['200', '400', '404', '409', '422']));
  });

  test('the suppression list: every route with the secret key, and /v1/send answers each recipient’s status', () => {
    const routes = {
      '/suppressions': ['get', 'post'],
      '/suppressions/{email}': ['delete'],
      '/suppressions/import': ['post'],
      '/suppressions/import/{jobId}': ['get'],
      '/suppressions/export': ['get'],
      '/suppressions/check': ['post'],
      '/suppressions/rules': ['get', 'post'],
      '/suppressions/rules/{id}': ['get', 'patch', 'delete'],
    };
    for (const [path, methods] of Object.entries(routes)) {
      expect(Object.keys(doc.paths[path]).sort()).toEqual([...methods].sort());
      for (const m of methods) expect([path, m, doc.paths[path][m].security]).toEqual([path, m, [{ secretKey: [] }]]);
    }
    expect(doc.paths['/suppressions/export'].get.responses['200'].content!['text/csv']).toBeDefined();
    const rule = doc.paths['/suppressions/rules'].post.requestBody!.content['application/json'].schema as any;
    expect(rule.properties.kind.enum).toEqual(['ADDRESS', 'DOMAIN', 'PREFIX', 'SUFFIX', 'WILDCARD']);
    const sent = (doc.paths['/v1/send'].post.responses['200'].content!['application/json'].schema as any).properties.data.properties.emails.items;
    expect(sent.properties.status.enum).toEqual(['QUEUED', 'SUPPRESSED']);
  });

  test('uploads are multipart with a binary field', () => {
    const schema = doc.paths['/contacts/import'].post.requestBody!.content['multipart/form-data'].schema as any;
    expect(schema.properties.file).toEqual(expect.objectContaining({ type: 'string', format: 'binary' }));
    expect(doc.paths['/uploads/image'].post.requestBody!.content['multipart/form-data'].schema).toEqual(expect.objectContaining({ required: ['image'] }));
  });

  test('the error envelope is a component', () => {
    const error = doc.components.schemas.Error as any;
    expect(error.required).toEqual(['success', 'error', 'timestamp']);
    expect(Object.keys(error.properties.error.properties)).toEqual(['code', 'message', 'statusCode', 'requestId', 'errors', 'details', 'suggestion']);
  });
});

describe('GET /docs', () => {
  test('a self-contained page listing every endpoint, text escaped', async () => {
    const res = await fetch(`${base}/docs`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await res.text();
    expect(html).not.toMatch(/<script|<link|src="http/i);
    for (const r of routeEntries(router)) {
      const path = openApiPath(r.path);
      expect(html).toContain(`id="${`${r.method.toLowerCase()}-${path}`.replace(/[^A-Za-z0-9]+/g, '-')}"`);
      expect(html).toContain(`<code>${path}</code>`);
    }
    // Text from schemas is escaped, never markup: the header-name pattern carries < and >.
    expect(html).not.toMatch(/<[^a-z/!]/);
  });
});
