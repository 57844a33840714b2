/**
 * Bounded capture of a command's combined output: the first `headBytes` and the last
 * `tailBytes` are kept, everything in between is only counted. Memory stays bounded however
 * much the command prints (the caller keeps reading, so the pipe never fills: spec/004's
 * deadlock). Rendering cuts on UTF-8 character boundaries and marks what was left out.
 */
export interface OutputCaptureOptions {
  /** Bytes kept from the start. Default 50 000. */
  readonly headBytes?: number;
  /** Bytes kept from the end. Default 50 000. */
  readonly tailBytes?: number;
}

export class OutputCapture {
  readonly #headLimit: number;
  readonly #tailLimit: number;
  readonly #head: Buffer[] = [];
  #headLength = 0;
  // A ring would save copies; a list of chunks trimmed from the front is simpler and the
  // amount kept is small.
  #tail: Buffer[] = [];
  #tailLength = 0;
  #total = 0;

  constructor(options: OutputCaptureOptions = {}) {
    this.#headLimit = options.headBytes ?? 50_000;
    this.#tailLimit = options.tailBytes ?? 50_000;
  }

  /** Total bytes seen. */
  get totalBytes(): number {
    return this.#total;
  }

  /** True once more arrived than head and tail can hold. */
  get truncated(): boolean {
    return this.#total > this.#headLimit + this.#tailLimit;
  }

  push(chunk: Buffer): void {
    this.#total += chunk.length;
    let rest = chunk;
    if (this.#headLength < this.#headLimit) {
      const take = Math.min(this.#headLimit - this.#headLength, rest.length);
      this.#head.push(rest.subarray(0, take));
      this.#headLength += take;
      rest = rest.subarray(take);
    }
    if (rest.length === 0 || this.#tailLimit === 0) return;
    if (rest.length >= this.#tailLimit) {
      this.#tail = [Buffer.from(rest.subarray(rest.length - this.#tailLimit))];
      this.#tailLength = this.#tailLimit;
      return;
    }
    this.#tail.push(Buffer.from(rest));
    this.#tailLength += rest.length;
    while (this.#tailLength > this.#tailLimit) {
      const first = this.#tail[0] as Buffer;
      const excess = this.#tailLength - this.#tailLimit;
      if (first.length <= excess) {
        this.#tail.shift();
        this.#tailLength -= first.length;
      } else {
        this.#tail[0] = first.subarray(excess);
        this.#tailLength -= excess;
      }
    }
  }

  /** The kept output as text: head, a marker with the omitted byte count, tail. */
  render(): string {
    const head = Buffer.concat(this.#head);
    const tail = Buffer.concat(this.#tail);
    if (!this.truncated) return toText(Buffer.concat([head, tail]));
    const headCut = head.subarray(0, utf8BoundaryBefore(head, head.length));
    const tailCut = tail.subarray(utf8BoundaryAfter(tail, 0));
    const omitted = this.#total - headCut.length - tailCut.length;
    return `${toText(headCut)}\n\n[... ${omitted} bytes of output omitted ...]\n\n${toText(tailCut)}`;
  }
}

/** True for a UTF-8 continuation byte (10xxxxxx). */
function isContinuation(byte: number): boolean {
  return (byte & 0xc0) === 0x80;
}

/**
 * The largest index <= `end` that does not split a multi-byte character of `buf[0..end)`.
 * A character is split when its lead byte is before `end` but its last byte is not.
 */
export function utf8BoundaryBefore(buf: Buffer, end: number): number {
  let i = end;
  // Walk back over at most 3 continuation bytes to the lead byte of the last character.
  let back = 0;
  while (i > 0 && back < 4 && isContinuation(buf[i - 1] as number)) {
    i--;
    back++;
  }
  if (i === 0) return end;
  const lead = buf[i - 1] as number;
  const length = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
  // Complete (or not a valid lead at all, i.e. binary): keep as is.
  if (length === 1 || back + 1 >= length) return end;
  return i - 1;
}

/** The smallest index >= `start` that is not a continuation byte (start of a character). */
export function utf8BoundaryAfter(buf: Buffer, start: number): number {
  let i = start;
  while (i < buf.length && i - start < 3 && isContinuation(buf[i] as number)) i++;
  return i;
}

/**
 * Decodes as UTF-8, turning invalid bytes into U+FFFD; NUL also becomes U+FFFD because the
 * text ends up in Postgres `text` columns, which refuse NUL.
 */
export function toText(buf: Buffer): string {
  return buf.toString('utf8').replaceAll('\u0000', '\uFFFD');
}
