/**
 * The Fetch API's `Headers`, for the CLI bundle only (scripts/build.mjs injects it in place of the
 * global): Connect makes a `new Headers()` for every call, and Node 20's global `Headers` loads the whole
 * of undici the first time it is touched (docs/cli.md, "How it runs"). Same behaviour as far as Connect
 * uses it: see the class.
 */

/** RFC 9110 token characters. */
const NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Values may not hold NUL, CR or LF (after trimming). */
const BAD_VALUE = /[\0\r\n]/;
/** Leading and trailing HTTP whitespace: tab, LF, CR, space. */
const EDGES = /^[\t\n\r ]+|[\t\n\r ]+$/g;

type Init = Iterable<readonly [string, string] | readonly string[]> | Record<string, string> | undefined;

function checkName(name: string): string {
  const n = String(name);
  if (!NAME.test(n)) throw new TypeError(`Headers: invalid header name "${n}"`);
  return n.toLowerCase();
}

function checkValue(value: string, name: string): string {
  const v = String(value).replace(EDGES, '');
  if (BAD_VALUE.test(v)) throw new TypeError(`Headers: invalid value for header "${name}"`);
  return v;
}

/**
 * The same class as far as Connect uses it: names are case-insensitive and kept lower-case, values
 * trimmed of HTTP whitespace, invalid names and values rejected with a TypeError, `get` joins repeated
 * values with ", ", and iteration goes by name in order (each Set-Cookie apart), as the Fetch standard
 * says.
 */
export class Headers {
  readonly #map = new Map<string, string[]>();

  constructor(init?: Init) {
    if (init === undefined || init === null) return;
    if (typeof init !== 'object') throw new TypeError('Headers: init must be an object');
    if (Symbol.iterator in init) {
      for (const pair of init as Iterable<readonly string[]>) {
        const p = [...pair];
        if (p.length !== 2) throw new TypeError('Headers: each header must be a [name, value] pair');
        this.append(p[0]!, p[1]!);
      }
    } else {
      for (const key of Object.keys(init)) this.append(key, (init as Record<string, string>)[key]!);
    }
  }

  append(name: string, value: string): void {
    const n = checkName(name);
    const v = checkValue(value, n);
    const values = this.#map.get(n);
    if (values) values.push(v);
    else this.#map.set(n, [v]);
  }

  set(name: string, value: string): void {
    const n = checkName(name);
    this.#map.set(n, [checkValue(value, n)]);
  }

  delete(name: string): void {
    this.#map.delete(checkName(name));
  }

  has(name: string): boolean {
    return this.#map.has(checkName(name));
  }

  get(name: string): string | null {
    return this.#map.get(checkName(name))?.join(', ') ?? null;
  }

  getSetCookie(): string[] {
    return [...(this.#map.get('set-cookie') ?? [])];
  }

  forEach(callback: (value: string, name: string, parent: Headers) => void, thisArg?: unknown): void {
    for (const [name, value] of this.entries()) callback.call(thisArg, value, name, this);
  }

  *entries(): IterableIterator<[string, string]> {
    for (const name of [...this.#map.keys()].sort()) {
      const values = this.#map.get(name);
      if (!values) continue; // deleted by a callback meanwhile
      if (name === 'set-cookie') for (const v of values) yield [name, v];
      else yield [name, values.join(', ')];
    }
  }

  *keys(): IterableIterator<string> {
    for (const [name] of this.entries()) yield name;
  }

  *values(): IterableIterator<string> {
    for (const [, value] of this.entries()) yield value;
  }

  [Symbol.iterator](): IterableIterator<[string, string]> {
    return this.entries();
  }

  get [Symbol.toStringTag](): string {
    return 'Headers';
  }
}
