// ESLint with typescript-eslint's recommended rules, plus the house's room rules (docs/architecture.md, "Rooms"):
// modules meet through their index.ts; the engines (delivery, inbound) import no module, nor HTTP, Temporal or
// each other; the base imports none of those; modules reach HTTP only from their edge files; one transaction API.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const moduleInternals = (depth) => ({
  regex: `^${'\\.\\./'.repeat(depth)}(?!\\.\\.)[^/]+/.+`,
  message: 'Import another module through its index.ts (`../<module>`), never its files.',
});

/** A relative import of one of the given top-level rooms of src/ (or temporal/), from any depth. */
const rooms = (names, message) => ({ regex: `^(\\./|(\\.\\./)+)(${names.join('|')})(/|$)`, message });

/** The base: what everything may use, and which uses nothing above it. */
const BASE = [
  'src/db/**/*.ts',
  'src/mail/**/*.ts',
  'src/net/**/*.ts',
  'src/dns/**/*.ts',
  'src/bus/**/*.ts',
  'src/config.ts',
  'src/metrics.ts',
  'src/log.ts',
  'src/errors.ts',
  'src/validation.ts',
  'src/thread-start.ts',
  'src/node-version.ts',
];

/**
 * A module's HTTP edge: its routes, and the schemas that describe what they accept and answer (built from
 * http/responses, query, pagination). Everything else in a module imports the base, never src/http.
 */
const MODULE_EDGE = ['src/modules/**/*.routes.ts', 'src/modules/**/*.schemas.ts', 'src/modules/contacts/preference-pages.ts'];
const noHttpFromModules = {
  regex: '^(\\.\\./)+http(/|$)',
  message: 'Only routes and schemas import src/http; throw from src/errors.ts, validate with src/validation.ts.',
};

// Modules start workflows through their WorkflowStarter port (src/modules/workflow-starter.ts), which main.ts wires to
// temporal/starts.ts: importing anything under temporal/ would close the cycle with the activities, which import modules.
const noTemporal = {
  regex: '^((\\.\\./)+temporal(/|$)|@temporalio/)',
  message: 'A module reaches Temporal through the WorkflowStarter port, never temporal/ or the SDK.',
};

const oneTransactionApi = [
  { selector: "CallExpression[callee.property.name='transactional']", message: 'Use transaction(em, fn) from src/db/orm.ts.' },
  { selector: "CallExpression[callee.property.name='begin'][arguments.length=0]", message: 'Use transaction(em, fn) from src/db/orm.ts.' },
];

export default tseslint.config(
  { ignores: ['**/dist/**', '**/node_modules/**', '**/fixtures/**', 'packages/*/webui/**', 'packages/*/features-suite/**', '**/*.js', '**/*.mjs'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', ignoreRestSiblings: true }],
      // Prettier's width, for every line: Prettier does not break strings, so a long one is split by hand (+, or a newline in SQL).
      'max-len': ['error', { code: 160 }],
    },
  },
  {
    // Migrations are generated and never edited once they land, so their SQL stays as the generator wrote it.
    files: ['migrations/**/*.ts'],
    rules: { 'max-len': 'off' },
  },
  {
    // Tests and benches read untyped JSON answers and drive libraries without types.
    files: ['test/**/*.ts', 'bench/**/*.ts', 'packages/*/test/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off', '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    // One transaction API (src/db/orm.ts): MikroORM's own would not share a connection with sql().
    files: ['src/**/*.ts', 'temporal/**/*.ts', 'test/**/*.ts'],
    rules: { 'no-restricted-syntax': ['error', ...oneTransactionApi] },
  },
  {
    // Thin routes: a route validates, calls its service and shapes the answer; reads, writes and transactions live in the service.
    files: ['src/modules/**/*.routes.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        ...oneTransactionApi,
        { selector: "CallExpression[callee.name='transaction']", message: 'A transaction belongs in the service the route calls.' },
        {
          selector: "CallExpression[callee.object.property.name='em'][callee.property.name!='fork']",
          message: 'Entity reads and writes belong in the service the route calls.',
        },
      ],
    },
  },
  { files: ['src/modules/*.ts'], rules: { 'no-restricted-imports': ['error', { patterns: [noTemporal] }] } },
  { files: ['src/modules/*/*.ts'], rules: { 'no-restricted-imports': ['error', { patterns: [moduleInternals(1), noTemporal] }] } },
  { files: ['src/modules/*/*/**/*.ts'], rules: { 'no-restricted-imports': ['error', { patterns: [moduleInternals(2), noTemporal] }] } },
  {
    files: ['src/modules/*/*.ts'],
    ignores: MODULE_EDGE,
    rules: { 'no-restricted-imports': ['error', { patterns: [moduleInternals(1), noTemporal, noHttpFromModules] }] },
  },
  {
    // Workflow code is bundled into Temporal's sandbox and replayed: it may import the SDK's workflow API, its siblings and the
    // workflow ids; activities, modules and every other source only as types (`import type`).
    files: ['temporal/workflows/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^(?!\\./|\\.\\./workflow-ids$|@temporalio/workflow$)',
              allowTypeImports: true,
              message: 'Workflow code imports only @temporalio/workflow, ./siblings and ../workflow-ids; anything else as `import type`.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['src/modules/*/*/**/*.ts'],
    ignores: MODULE_EDGE,
    rules: { 'no-restricted-imports': ['error', { patterns: [moduleInternals(2), noTemporal, noHttpFromModules] }] },
  },
  {
    files: BASE,
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [rooms(['modules', 'http', 'delivery', 'inbound', 'temporal'], 'The base imports no module, HTTP, engine or Temporal code.')] },
      ],
    },
  },
  {
    // The engines report outcomes and fetch what they need through their ports (delivery-ports.ts, inbound-ports.ts), which main.ts wires.
    files: ['src/delivery/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [rooms(['modules', 'http', 'inbound', 'temporal'], 'delivery/ imports only the base; modules reach it through ./delivery-ports.ts.')] },
      ],
    },
  },
  {
    files: ['src/inbound/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [rooms(['modules', 'http', 'delivery', 'temporal'], 'inbound/ imports only the base; modules reach it through ./inbound-ports.ts.')] },
      ],
    },
  },
);
