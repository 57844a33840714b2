export * from './start-embedded.ts';
