import { describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { freePort } from './free-port.ts';

describe('freePort', () => {
  it('gives a port that can be bound on 127.0.0.1', async () => {
    const port = await freePort();
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', resolve);
    });
    await new Promise((r) => server.close(r));
  });

  it('claims each port it hands out against every other process on the machine until it is bound', async () => {
    const mine: number[] = [];
    for (let i = 0; i < 20; i++) mine.push(await freePort());
    expect(new Set(mine).size).toBe(20);
    // Another process asks to claim exactly these ports, none of them bound yet: it is refused every one.
    const script = `import('${fileURLToPath(new URL('./free-port.ts', import.meta.url))}').then(({ reserve }) => {
      console.log(JSON.stringify(${JSON.stringify(mine)}.map((p) => reserve(p))));
    })`;
    const granted: boolean[] = JSON.parse(execFileSync('npx', ['tsx', '-e', script], { encoding: 'utf8' }).trim().split('\n').pop()!);
    expect(granted).toEqual(mine.map(() => false));
  });
});
