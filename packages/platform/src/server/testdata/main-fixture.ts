/**
 * A thin main.ts as services write them, for shutdown.test.ts: reads the environment,
 * starts gRPC (health + reflection) and metrics, prints the ports, stops on SIGTERM.
 */
import { health as pb } from '@bedrock/contracts';
import { loadConfig, section } from '../../config/config.ts';
import { logLevelSetting, serverSection } from '../../config/common.ts';
import { startGrpcServer } from '../grpc-server.ts';
import { createHealth, registerHealth } from '../health.ts';
import { createLogger } from '../logger.ts';
import { createMetrics } from '../metrics.ts';
import { startMetricsServer } from '../metrics-server.ts';
import { registerReflection } from '../reflection.ts';
import { onShutdown } from '../shutdown.ts';

const config = loadConfig(section({ log: section({ level: logLevelSetting }), server: serverSection({}) }));
const logger = createLogger({ service: 'fixture', level: config.log.level });
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
const metricsServer = await startMetricsServer({ port: config.server.metricsPort, host: '127.0.0.1', registry: metrics.registry, health });
onShutdown(
  async () => {
    health.shutdown();
    await grpc.close(config.server.shutdownGrace);
    await metricsServer.close();
  },
  { logger, graceMs: config.server.shutdownGrace + 1000 },
);
logger.info({ grpc_port: grpc.port, metrics_port: metricsServer.port }, 'ready');
