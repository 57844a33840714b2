/**
 * `npm start`: the whole product on its embedded defaults. Until the services land, this
 * says plainly what is missing instead of pretending to run.
 */
const missing = ['conversation service', 'tool-runner', 'llm-gateway', 'web-bff'];
console.error(
  `Bedrock cannot start yet: ${missing.join(', ')} are not built. ` +
    'The contracts and the pure state machine are in place; run `make test` to exercise them.',
);
process.exit(2);
