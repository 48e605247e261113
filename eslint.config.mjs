// ESLint with typescript-eslint's recommended rules, plus the house's room rules: modules meet through
// their index.ts, the base (db, mail, net, dns, bus, config, metrics) imports no module, and one transaction API.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const moduleInternals = (depth) => ({
  regex: `^${'\\.\\./'.repeat(depth)}(?!\\.\\.)[^/]+/.+`,
  message: 'Import another module through its index.ts (`../<module>`), never its files.',
});

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
    files: ['src/db/**/*.ts', 'src/mail/**/*.ts', 'src/net/**/*.ts', 'src/dns/**/*.ts', 'src/bus/**/*.ts', 'src/config.ts', 'src/metrics.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [{ regex: '(^|/)modules(/|$)', message: 'The base imports no module.' }] }] },
  },
);
