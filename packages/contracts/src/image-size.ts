/**
 * An image's format and size read from its header alone, without decoding a pixel and without any
 * dependency (docs/conversation.md, "Input validation"): PNG's IHDR, JPEG's SOF segment, GIF's logical
 * screen descriptor, WebP's VP8, VP8L or VP8X chunk. Used before an image is admitted, to refuse one too
 * large to decode cheaply, and to bound what the decoder may allocate.
 */

export type HeaderFormat = 'png' | 'jpeg' | 'gif' | 'webp';

export interface ImageSize {
  readonly format: HeaderFormat;
  readonly width: number;
  readonly height: number;
}

/** The data is not one of the four formats, or its header is malformed; `message` says why. */
export class ImageHeaderError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ImageHeaderError';
  }
}

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];
/** PNG's largest dimension (2^31 - 1). */
const PNG_MAX = 0x7fffffff;

function startsWith(data: Uint8Array, bytes: readonly number[], at = 0): boolean {
  if (data.length < at + bytes.length) return false;
  return bytes.every((b, i) => data[at + i] === b);
}

function ascii(data: Uint8Array, at: number, length: number): string {
  return String.fromCharCode(...data.subarray(at, at + length));
}

const u16be = (d: Uint8Array, i: number) => (d[i]! << 8) | d[i + 1]!;
const u16le = (d: Uint8Array, i: number) => d[i]! | (d[i + 1]! << 8);
const u24le = (d: Uint8Array, i: number) => d[i]! | (d[i + 1]! << 8) | (d[i + 2]! << 16);
const u32be = (d: Uint8Array, i: number) => ((d[i]! << 24) >>> 0) + ((d[i + 1]! << 16) | (d[i + 2]! << 8) | d[i + 3]!);

function need(data: Uint8Array, length: number, what: string): void {
  if (data.length < length) throw new ImageHeaderError(`${what}: the header is cut short (${data.length} of at least ${length} bytes)`);
}

function positive(format: string, width: number, height: number): void {
  if (width <= 0 || height <= 0) throw new ImageHeaderError(`${format} header: the size is ${width}×${height}`);
}

function png(data: Uint8Array): ImageSize {
  need(data, 24, 'PNG');
  if (ascii(data, 12, 4) !== 'IHDR') throw new ImageHeaderError('PNG header: the first chunk is not IHDR');
  if (u32be(data, 8) !== 13) throw new ImageHeaderError(`PNG header: IHDR is ${u32be(data, 8)} bytes, not 13`);
  const width = u32be(data, 16);
  const height = u32be(data, 20);
  positive('PNG', width, height);
  if (width > PNG_MAX || height > PNG_MAX) throw new ImageHeaderError(`PNG header: the size ${width}×${height} is out of range`);
  return { format: 'png', width, height };
}

/** SOF markers: baseline, extended, progressive, lossless (Huffman and arithmetic); not DHT (C4), JPG (C8), DAC (CC). */
function isStartOfFrame(marker: number): boolean {
  return marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc;
}

function jpeg(data: Uint8Array): ImageSize {
  let i = 2;
  for (;;) {
    // Markers may be preceded by any number of 0xFF fill bytes.
    if (i >= data.length) throw new ImageHeaderError('JPEG header: the data ends before a frame header (SOF)');
    if (data[i] !== 0xff) throw new ImageHeaderError(`JPEG header: no marker at byte ${i}`);
    while (i < data.length && data[i] === 0xff) i++;
    if (i >= data.length) throw new ImageHeaderError('JPEG header: the data ends before a frame header (SOF)');
    const marker = data[i]!;
    i++;
    // Markers without a length: TEM, RSTn, SOI.
    if (marker === 0x01 || (marker >= 0xd0 && marker <= 0xd8)) continue;
    if (marker === 0xd9 || marker === 0xda) throw new ImageHeaderError('JPEG header: the image data starts before a frame header (SOF)');
    need(data, i + 2, 'JPEG');
    const length = u16be(data, i);
    if (length < 2) throw new ImageHeaderError(`JPEG header: a segment at byte ${i} has length ${length}`);
    if (isStartOfFrame(marker)) {
      if (length < 8) throw new ImageHeaderError(`JPEG header: the frame header is ${length} bytes`);
      need(data, i + 7, 'JPEG');
      const height = u16be(data, i + 3);
      const width = u16be(data, i + 5);
      positive('JPEG', width, height);
      return { format: 'jpeg', width, height };
    }
    i += length;
  }
}

function gif(data: Uint8Array): ImageSize {
  need(data, 10, 'GIF');
  const width = u16le(data, 6);
  const height = u16le(data, 8);
  positive('GIF', width, height);
  return { format: 'gif', width, height };
}

function webp(data: Uint8Array): ImageSize {
  need(data, 16, 'WebP');
  const chunk = ascii(data, 12, 4);
  switch (chunk) {
    case 'VP8 ': {
      need(data, 30, 'WebP (VP8)');
      if (!startsWith(data, [0x9d, 0x01, 0x2a], 23)) throw new ImageHeaderError('WebP header: the VP8 frame has no start code');
      const width = u16le(data, 26) & 0x3fff;
      const height = u16le(data, 28) & 0x3fff;
      positive('WebP', width, height);
      return { format: 'webp', width, height };
    }
    case 'VP8L': {
      need(data, 25, 'WebP (VP8L)');
      if (data[20] !== 0x2f) throw new ImageHeaderError('WebP header: the VP8L chunk has no signature');
      const bits = (data[21]! | (data[22]! << 8) | (data[23]! << 16) | (data[24]! << 24)) >>> 0;
      return { format: 'webp', width: (bits & 0x3fff) + 1, height: ((bits >>> 14) & 0x3fff) + 1 };
    }
    case 'VP8X': {
      need(data, 30, 'WebP (VP8X)');
      return { format: 'webp', width: u24le(data, 24) + 1, height: u24le(data, 27) + 1 };
    }
    default:
      throw new ImageHeaderError(`WebP header: unknown first chunk ${JSON.stringify(chunk)}`);
  }
}

/** The format the data starts like, from its magic bytes; null when none of the four. */
export function sniffImageFormat(data: Uint8Array): HeaderFormat | null {
  if (startsWith(data, PNG_SIGNATURE)) return 'png';
  if (startsWith(data, [0xff, 0xd8, 0xff])) return 'jpeg';
  if (data.length >= 6 && (ascii(data, 0, 6) === 'GIF87a' || ascii(data, 0, 6) === 'GIF89a')) return 'gif';
  if (data.length >= 12 && ascii(data, 0, 4) === 'RIFF' && ascii(data, 8, 4) === 'WEBP') return 'webp';
  return null;
}

/**
 * The format and size from the header. Throws ImageHeaderError when the data is none of PNG,
 * JPEG, GIF and WebP, or its header is malformed or cut short; never anything else. Pure: it reads
 * a few dozen bytes for PNG, GIF and WebP and walks a JPEG's segment headers (each step moves
 * forward, so it ends within the data's length).
 */
export function readImageSize(data: Uint8Array): ImageSize {
  switch (sniffImageFormat(data)) {
    case 'png':
      return png(data);
    case 'jpeg':
      return jpeg(data);
    case 'gif':
      return gif(data);
    case 'webp':
      return webp(data);
    case null:
      throw new ImageHeaderError('not a PNG, JPEG, GIF or WebP header');
  }
}
