import { readFileSync } from 'node:fs';
import net from 'node:net';

/**
 * The first port of the kernel's ephemeral range (outgoing connections take their local ports
 * from it), from /proc; 32768 where it cannot be read.
 */
function ephemeralStart(): number {
  try {
    const [low] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    return low && low > 2048 ? low : 32768;
  } catch {
    return 32768;
  }
}

function tryListen(port: number): Promise<number | null> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.unref();
    server.once('error', () => resolve(null));
    server.listen(port, '127.0.0.1', () => {
      const { port: bound } = server.address() as net.AddressInfo;
      server.close(() => resolve(bound));
    });
  });
}

/**
 * A TCP port free on 127.0.0.1 right now, for a process started a moment later. Chosen below
 * the ephemeral range: a port the OS picks (listen on 0) comes from that range, which every
 * outgoing connection draws from too, so during the seconds before the process binds it
 * (a tool-runner probes its sandbox first) a Redis or Postgres connection could take it.
 */
export async function freePort(): Promise<number> {
  const top = ephemeralStart();
  const bottom = Math.max(1024, top - 12_000);
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = await tryListen(bottom + Math.floor(Math.random() * (top - bottom)));
    if (port !== null) return port;
  }
  const port = await tryListen(0);
  if (port === null) throw new Error('no free TCP port on 127.0.0.1');
  return port;
}
