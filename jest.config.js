/** Jest runs TypeScript through SWC as native ESM (node --experimental-vm-modules). */
const swc = [
  '@swc/jest',
  {
    // keepImportAttributes: `import … with { type: 'json' }` reaches Node as written.
    jsc: { parser: { syntax: 'typescript' }, target: 'es2022', experimental: { keepImportAttributes: true } },
    module: { type: 'es6' },
  },
];

export default {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  transform: { '^.+\\.ts$': swc },
  testMatch: ['<rootDir>/{packages,services,apps}/*/{src,test}/**/*.test.ts'],
  testPathIgnorePatterns: ['/node_modules/'],
  // Integration and end-to-end suites start real servers; give them room.
  testTimeout: 30000,
  // The suites run one at a time (2 CPUs: one worker), in a worker that is replaced once it holds
  // more than this after a suite: each suite's ES modules stay in memory, and in band (one
  // process for all) the run ran out of heap at its 241st suite of 269.
  workerIdleMemoryLimit: '1536MB',
};
