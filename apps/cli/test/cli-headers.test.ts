/**
 * The CLI bundle gives Connect its own `Headers` (src/cli/bundle/headers.ts) instead of Node's
 * global, which loads undici (docs/cli.md, "How it runs"). It must answer as the global does
 * for everything Connect does with headers.
 */
import { describe, expect, it } from '@jest/globals';
import { Headers as PlainHeaders } from '../src/bundle/headers.ts';

type AnyHeaders = InstanceType<typeof PlainHeaders> | globalThis.Headers;
type Make = (init?: never) => AnyHeaders;

/** Everything observable of a Headers object. */
function view(h: AnyHeaders) {
  const each: string[][] = [];
  h.forEach((value, name, self) => each.push([name, value, String(self === h)]));
  return { entries: [...h], keys: [...h.keys()], values: [...h.values()], each, setCookie: h.getSetCookie() };
}

/** Runs the same steps on both classes and compares what they show (or that both throw TypeError). */
function same(steps: (make: Make) => AnyHeaders | unknown) {
  const outcome = (make: Make) => {
    try {
      const r = steps(make);
      return r instanceof PlainHeaders || r instanceof globalThis.Headers ? view(r) : r;
    } catch (err) {
      // By name: Node's global throws from another realm than the test's.
      return { threw: (err as Error).name === 'TypeError' ? 'TypeError' : String(err) };
    }
  };
  const plain = outcome((init) => new PlainHeaders(init));
  const global = outcome((init) => new globalThis.Headers(init));
  expect(plain).toEqual(global);
  return plain;
}

describe('the CLI bundle’s Headers', () => {
  it('keeps names lower-case and answers case-insensitively', () => {
    same((make) => {
      const h = make();
      h.set('Content-Type', 'application/proto');
      h.append('X-Multi', 'a');
      h.append('x-multi', 'b');
      return [h.get('CONTENT-TYPE'), h.get('x-multi'), h.has('X-MULTI'), h.has('nope'), h.get('nope'), view(h)];
    });
  });

  it('set replaces, delete removes, iteration is sorted by name', () => {
    const v = same((make) => {
      const h = make();
      for (const [k, v] of [
        ['zeta', '1'],
        ['Alpha', '2'],
        ['mid', '3'],
        ['alpha', '4'],
      ])
        h.append(k!, v!);
      h.set('mid', '5');
      h.delete('ZETA');
      return h;
    });
    expect(v).toMatchObject({ keys: ['alpha', 'mid'] });
  });

  it('copies from a record, from pairs and from either kind of Headers', () => {
    same((make) => make({ 'Connect-Protocol-Version': '1', accept: 'x' } as never));
    same((make) =>
      make([
        ['a', '1'],
        ['A', '2'],
        ['b', '3'],
      ] as never),
    );
    same((make) => make(new PlainHeaders({ a: '1', b: '2' }) as never));
    same((make) => make(new globalThis.Headers({ a: '1', b: '2' }) as never));
    same((make) => make(undefined));
  });

  it('trims values, keeps each Set-Cookie apart, rejects bad names and values', () => {
    same((make) => {
      const h = make();
      h.set('x', ' \t padded \t ');
      h.append('set-cookie', 'a=1');
      h.append('Set-Cookie', 'b=2');
      return h;
    });
    same((make) => make().set('bad name', 'x'));
    same((make) => make().set('', 'x'));
    same((make) => make().append('x', 'a\nb'));
    same((make) => make().append('x', 'a\0b'));
    same((make) => make([['only-a-name']] as never));
  });
});
