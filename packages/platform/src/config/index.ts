/** Settings: one schema per service (zod), read from the environment and typed overrides; docs from the same schema. */
export * from './config.ts';
export * from './types.ts';
export * from './common.ts';
/** The schema library itself, for a service's own setting types and `z.output<typeof schema>`: one zod for all. */
export { z } from 'zod';
