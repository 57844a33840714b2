/**
 * A TCP proxy between web-bff and its upstream, so a test can break the connection the way
 * a dying pod or a network does: reset it (RST), close it (FIN), swallow the answers, or
 * refuse new connections while the upstream is "down", and point it at a new upstream.
 */
import net, { type AddressInfo } from 'node:net';

export interface TcpProxy {
  readonly url: string;
  /** Where new connections go (e.g. a restarted service on another port). */
  target: number;
  /** Connections made so far. */
  readonly accepted: () => number;
  /** Drop every byte the upstream sends back (the caller waits for an answer that never comes). */
  blackhole(on: boolean): void;
  /** Reset every open connection (RST on both sides), as when a pod dies or the network breaks. */
  reset(): void;
  /** Close every open connection cleanly (FIN on both sides). */
  end(): void;
  /** Refuse new connections (reset at once) while the upstream is down. */
  refuse(on: boolean): void;
  close(): Promise<void>;
}

/** Resets an open connection, destroys a half-closed one (resetAndDestroy() of a half-closed socket spins the event loop on Node 20). */
function resetSocket(s: net.Socket): void {
  if (s.destroyed) return;
  if (s.readyState === 'open') s.resetAndDestroy();
  else s.destroy();
}

export async function startTcpProxy(targetPort: number): Promise<TcpProxy> {
  const pairs = new Set<[net.Socket, net.Socket]>();
  let blackholed = false;
  let refusing = false;
  let accepted = 0;
  const server = net.createServer((client) => {
    accepted++;
    client.on('error', () => undefined);
    if (refusing) {
      resetSocket(client);
      return;
    }
    const upstream = net.connect(proxy.target, '127.0.0.1');
    upstream.on('error', () => resetSocket(client));
    const pair: [net.Socket, net.Socket] = [client, upstream];
    pairs.add(pair);
    const forget = () => pairs.delete(pair);
    client.on('close', forget);
    upstream.on('close', forget);
    client.on('data', (chunk) => upstream.write(chunk));
    upstream.on('data', (chunk) => {
      if (!blackholed) client.write(chunk);
    });
    client.on('end', () => upstream.end());
    upstream.on('end', () => client.end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const proxy: TcpProxy = {
    url: `http://127.0.0.1:${port}`,
    target: targetPort,
    accepted: () => accepted,
    blackhole(on) {
      blackholed = on;
    },
    reset() {
      for (const [client, upstream] of pairs) {
        resetSocket(client);
        resetSocket(upstream);
      }
      pairs.clear();
    },
    end() {
      for (const [client, upstream] of pairs) {
        client.end();
        upstream.end();
      }
    },
    refuse(on) {
      refusing = on;
    },
    async close() {
      proxy.reset();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return proxy;
}
