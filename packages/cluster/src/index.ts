export * from './cluster.ts';
export * from './free-port.ts';
export * from './service-process.ts';
