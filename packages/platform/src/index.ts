export * from './interfaces.ts';
