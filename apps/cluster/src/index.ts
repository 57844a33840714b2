export * from './cluster.ts';
export * from './service-process.ts';
