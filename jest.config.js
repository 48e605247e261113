/** @type {import('jest').Config} */
module.exports = {
  // The service's tests and each workspace package's own (its jest.config.js): `npm test` runs them all.
  projects: [
    {
      displayName: 'postbox',
      testEnvironment: 'node',
      // Workspace packages run from their TypeScript sources (their `@postbox/source` export), not a build.
      testEnvironmentOptions: { customExportConditions: ['node', 'node-addons', '@postbox/source'] },
      roots: ['<rootDir>/test'],
      testMatch: ['**/*.test.ts'],
      transform: {
        '^.+\\.ts$': ['@swc/jest', { jsc: { parser: { syntax: 'typescript' }, target: 'es2022' }, module: { type: 'commonjs' }, sourceMaps: 'inline' }],
      },
      globalSetup: '<rootDir>/test/setup/global-setup.ts',
      globalTeardown: '<rootDir>/test/setup/global-teardown.ts',
    },
    '<rootDir>/packages/temporal-devserver',
  ],
  // Both apply to every project (jest reads them from this root configuration only).
  testTimeout: 60_000,
  maxWorkers: 2,
};
