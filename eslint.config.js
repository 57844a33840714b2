import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import globals from 'globals';

/**
 * The pure core (services/conversation/src/core) computes the next state and effects and
 * runs none of them: no I/O modules, no clocks, no randomness. Time and ids come in
 * through the context or the event (REQ-BED-001).
 */
const pureCore = {
  files: ['services/conversation/src/core/**/*.ts'],
  ignores: ['**/*.test.ts'],
  languageOptions: { globals: {} },
  rules: {
    'no-restricted-imports': [
      'error',
      {
        patterns: [
          {
            regex: '^(?!\\.{1,2}/|@bedrock/contracts/(?:tools|mcp)$)',
            message:
              'The state machine is pure: import only sibling core files (and @bedrock/contracts/tools and /mcp). I/O belongs in the shell.',
          },
        ],
      },
    ],
    'no-restricted-globals': [
      'error',
      ...['process', 'setTimeout', 'setInterval', 'setImmediate', 'fetch', 'crypto', 'performance', 'require', 'Deno', 'Bun'].map(
        (name) => ({ name, message: `${name} is I/O or non-deterministic; pass what you need in the context or event.` }),
      ),
    ],
    'no-restricted-properties': [
      'error',
      { object: 'Date', property: 'now', message: 'No clocks in the pure core: time comes in the event or context.' },
      { object: 'Math', property: 'random', message: 'No randomness in the pure core: ids come in the event or context.' },
      { object: 'performance', property: 'now', message: 'No clocks in the pure core.' },
    ],
    'no-restricted-syntax': [
      'error',
      { selector: "NewExpression[callee.name='Date']", message: 'No clocks in the pure core: time comes in the event or context.' },
      { selector: 'ImportExpression', message: 'No dynamic imports in the pure core.' },
    ],
  },
};

/**
 * Layers: imports only go down. `apps/` (whole-product compositions) may import services;
 * a service imports shared packages, never another service or an app; a shared package
 * imports only shared packages. Applies to what ships (`src/`); tests and benchmarks may run
 * the whole product. See docs/architecture.md, "Where the code lives".
 */
const SERVICE_NAMES = ['conversation', 'llm-gateway', 'tool-runner', 'web-bff'];
const APP_NAMES = ['embedded', 'cluster'];
const upward = (names, message) => ({
  // bedrock-agent: the CLI (apps/cli), named for the npm registry.
  regex: `^(@bedrock/(${names.join('|')})(/.*)?|bedrock-agent(/.*)?|(\\.\\./)+(\\.\\./)(services|apps)/.*)$`,
  message,
});
const layers = [
  {
    files: ['packages/*/src/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [upward([...SERVICE_NAMES, ...APP_NAMES], 'A shared package imports only shared packages: not a service or an app.')] },
      ],
    },
  },
  {
    files: ['services/*/src/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [upward([...SERVICE_NAMES, ...APP_NAMES], 'A service imports shared packages only: not another service or an app.')] },
      ],
    },
  },
];

/**
 * @bedrock/agent-view is shared by the web UI (a browser) and the CLI (Node): pure functions,
 * no Node modules and no DOM or Node globals.
 */
const agentView = {
  files: ['packages/agent-view/src/**/*.ts'],
  rules: {
    'no-restricted-imports': [
      'error',
      {
        patterns: [
          upward([...SERVICE_NAMES, ...APP_NAMES], 'A shared package imports only shared packages: not a service or an app.'),
          { regex: '^node:', message: 'agent-view runs in the browser too: no Node modules.' },
        ],
      },
    ],
    'no-restricted-globals': [
      'error',
      ...['process', 'Buffer', 'require', 'document', 'window', 'localStorage', 'navigator'].map((name) => ({
        name,
        message: `${name} is Node- or browser-only; agent-view is pure functions for both.`,
      })),
    ],
  },
};

/**
 * A service is registered whole (`serveService`, a full `ServiceImpl`): `router.service` takes a
 * `Partial`, so an RPC left out would compile and answer UNIMPLEMENTED (docs/extending.md).
 */
const wholeServices = {
  files: ['services/*/src/**/*.ts', 'apps/*/src/**/*.ts'],
  rules: {
    'no-restricted-syntax': [
      'error',
      {
        selector: "CallExpression[callee.object.name='router'][callee.property.name='service']",
        message:
          'Register with serveService(router, Service, impl) from @bedrock/platform/server: a method left out then fails to compile.',
      },
    ],
  },
};

export default tseslint.config(
  { ignores: ['**/node_modules/**', '**/dist/**', 'packages/contracts/src/gen/**', '.bedrock/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node }, ecmaVersion: 2023, sourceType: 'module' },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
    },
  },
  ...layers,
  agentView,
  wholeServices,
  pureCore,
);
