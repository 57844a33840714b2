/**
 * A TCP proxy to a dependency that a test can take down (open connections reset, new ones
 * refused) and bring back: how the readiness tests make Postgres, Redis or a service
 * unreachable without stopping the shared server. Its sockets never keep a test process alive.
 */
import net, { type AddressInfo } from 'node:net';

export interface SwitchProxy {
  readonly port: number;
  /** Resets every open connection and refuses new ones. */
  down(): void;
  up(): void;
  close(): Promise<void>;
}

/**
 * Resets an open connection; a socket already half-closed or closed is only destroyed: on
 * Node 20, resetAndDestroy() of a half-closed socket (its peer ended first) spins the event
 * loop forever, which kept the test process from exiting.
 */
function reset(s: net.Socket): void {
  if (s.destroyed) return;
  if (s.readyState === 'open') s.resetAndDestroy();
  else s.destroy();
}

export async function startSwitchProxy(targetPort: number, host = '127.0.0.1'): Promise<SwitchProxy> {
  const sockets = new Set<net.Socket>();
  let refusing = false;
  const track = (s: net.Socket): void => {
    s.unref();
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  };
  const server = net.createServer((client) => {
    client.on('error', () => undefined);
    if (refusing) return void reset(client);
    const upstream = net.connect(targetPort, host);
    upstream.on('error', () => reset(client));
    client.on('error', () => reset(upstream));
    track(client);
    track(upstream);
    client.pipe(upstream).pipe(client);
  });
  server.unref();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const down = (): void => {
    refusing = true;
    for (const s of sockets) reset(s);
  };
  return {
    port: (server.address() as AddressInfo).port,
    down,
    up: () => void (refusing = false),
    close: async () => {
      down();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
