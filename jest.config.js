/** Jest runs TypeScript through SWC as native ESM (node --experimental-vm-modules). */
import { availableParallelism } from 'node:os';

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
  // At least two suites at once, also on 2 CPUs (Jest's default there is one): most of the long
  // suites wait (failovers, timeouts, token lifetimes, a browser), so two workers cut the run on
  // this 2-CPU machine from 23.8 to 14.2 minutes with the same results (docs/testing.md).
  maxWorkers: Math.max(2, availableParallelism() - 1),
  // Each worker is replaced once it holds more than this after a suite: each suite's ES modules
  // stay in memory, and in band (one process for all) the run ran out of heap at its 241st suite
  // of 269.
  workerIdleMemoryLimit: '1536MB',
};
