import { closeSync, mkdirSync, openSync, readFileSync, statSync, utimesSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** How long a port handed out stays reserved against other processes on this machine. */
const RESERVE_MS = 120_000;
const RESERVATIONS = join(tmpdir(), 'bedrock-free-ports');

/**
 * Claims `port` for this process for RESERVE_MS: a marker file made with O_EXCL in a directory
 * every process on the machine shares. Two test workers starting clusters at once each probe ports
 * that are free at that moment; without the claim both could pick one that neither has bound yet.
 */
export function reserve(port: number): boolean {
  const marker = join(RESERVATIONS, String(port));
  try {
    mkdirSync(RESERVATIONS, { recursive: true, mode: 0o1777 });
    closeSync(openSync(marker, 'wx'));
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') return true; // no shared directory: probing alone
    try {
      if (Date.now() - statSync(marker).mtimeMs < RESERVE_MS) return false;
      const now = new Date();
      utimesSync(marker, now, now); // a stale claim: take it over
      return true;
    } catch {
      return false;
    }
  }
}

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
 * (a tool-runner probes its sandbox first) a Redis or Postgres connection could take it. A port
 * handed out is claimed for two minutes against every other process on the machine (see reserve).
 */
export async function freePort(): Promise<number> {
  const top = ephemeralStart();
  const bottom = Math.max(1024, top - 12_000);
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = await tryListen(bottom + Math.floor(Math.random() * (top - bottom)));
    if (port !== null && reserve(port)) return port;
  }
  const port = await tryListen(0);
  if (port === null) throw new Error('no free TCP port on 127.0.0.1');
  return port;
}
