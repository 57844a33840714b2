/** For grpc-server.test.ts: 25 calls in flight at once on one server; prints the process warnings it saw as one JSON line. */
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { health } from '@bedrock/contracts';
import { startGrpcServer } from '../grpc-server.ts';
import { createLogger } from '../logger.ts';

const warnings: string[] = [];
process.on('warning', (w) => warnings.push(`${w.name}: ${w.message}`));
const server = await startGrpcServer({
  port: 0,
  host: '127.0.0.1',
  logger: createLogger({ service: 'fixture', level: 'silent' }),
  routes: (router) =>
    router.service(health.Health, {
      async check() {
        await new Promise((r) => setTimeout(r, 100));
        return { status: health.HealthCheckResponse_ServingStatus.SERVING };
      },
    }),
});
const client = createClient(health.Health, createGrpcTransport({ baseUrl: server.url }));
await Promise.all(Array.from({ length: 25 }, () => client.check({})));
await server.close(0);
process.stdout.write(`${JSON.stringify({ warnings })}\n`);
process.exit(0);
