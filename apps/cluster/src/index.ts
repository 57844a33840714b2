export * from './cluster.ts';
export * from './service-process.ts';
export * from './ha-postgres.ts';
