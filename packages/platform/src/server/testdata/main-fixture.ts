/**
 * A thin main.ts as services write them, for shutdown.test.ts: reads the environment,
 * starts gRPC (health + reflection) and metrics, prints the ports, stops on SIGTERM.
 */
import { health as pb } from '@bedrock/contracts';
import { commonEnv } from '../common-env.ts';
import { readEnv } from '../env.ts';
import { startGrpcServer } from '../grpc-server.ts';
import { createHealth, registerHealth } from '../health.ts';
import { createLogger } from '../logger.ts';
import { createMetrics } from '../metrics.ts';
import { startMetricsServer } from '../metrics-server.ts';
import { registerReflection } from '../reflection.ts';
import { onShutdown } from '../shutdown.ts';

const config = readEnv(commonEnv);
const logger = createLogger({ service: 'fixture', level: config.logLevel });
const health = createHealth();
const metrics = createMetrics('fixture');
const grpc = await startGrpcServer({
  routes: (router) => {
    registerHealth(router, health);
    registerReflection(router, [pb.Health]);
  },
  host: '127.0.0.1',
  port: 0,
  logger,
});
const metricsServer = await startMetricsServer({ port: config.metricsPort, host: '127.0.0.1', registry: metrics.registry, health });
onShutdown(
  async () => {
    health.shutdown();
    await grpc.close(config.shutdownGraceMs);
    await metricsServer.close();
  },
  { logger, graceMs: config.shutdownGraceMs + 1000 },
);
logger.info({ grpc_port: grpc.port, metrics_port: metricsServer.port }, 'ready');
