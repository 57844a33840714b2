/**
 * The whole flows suite (flows.e2e.test.ts) again, on a Redis Cluster of its own (3 masters + 3
 * replicas; every service with BEDROCK_REDIS_CLUSTER=on): the same product behaviour, unchanged.
 */
process.env.BEDROCK_E2E_REDIS = 'cluster';
await import('./flows.e2e.test.ts');
