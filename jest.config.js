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
};
