import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import sharp from 'sharp';
import { ImageHeaderError, readImageSize, sniffImageFormat, type HeaderFormat } from './image-size.ts';

const FORMATS: readonly HeaderFormat[] = ['png', 'jpeg', 'gif', 'webp'];

/** A real file of `format`, encoded by libvips. */
async function encoded(format: HeaderFormat, width: number, height: number, options: { lossless?: boolean; progressive?: boolean } = {}) {
  const image = sharp({ create: { width, height, channels: 3, background: '#336699' } });
  switch (format) {
    case 'png':
      return new Uint8Array(await image.png().toBuffer());
    case 'jpeg':
      return new Uint8Array(
        await image
          .jpeg({ progressive: options.progressive ?? false })
          .withMetadata({ density: 72 })
          .toBuffer(),
      );
    case 'gif':
      return new Uint8Array(await image.gif().toBuffer());
    case 'webp':
      return new Uint8Array(await image.webp({ lossless: options.lossless ?? false }).toBuffer());
  }
}

/** readImageSize's outcome: the size, or the ImageHeaderError's message; anything else thrown fails the test. */
function outcome(data: Uint8Array): { size: ReturnType<typeof readImageSize> } | { refused: string } {
  try {
    return { size: readImageSize(data) };
  } catch (err) {
    if (err instanceof ImageHeaderError) return { refused: err.message };
    throw err;
  }
}

describe('readImageSize', () => {
  it('reads the size libvips reads, from the header of real PNG, JPEG, GIF and WebP files', async () => {
    const cases: [HeaderFormat, number, number, { lossless?: boolean; progressive?: boolean }?][] = [
      ['png', 1, 1],
      ['png', 640, 3],
      ['jpeg', 37, 1021],
      ['jpeg', 300, 200, { progressive: true }],
      ['gif', 65, 7],
      ['webp', 123, 45],
      ['webp', 16383, 2, { lossless: true }],
    ];
    for (const [format, width, height, options] of cases) {
      const data = await encoded(format, width, height, options);
      const meta = await sharp(data).metadata();
      expect({ format, width, height }).toEqual({ format: meta.format, width: meta.width, height: meta.height });
      expect(readImageSize(data)).toEqual({ format, width, height });
    }
  });

  it('reads a WebP with an extended header (VP8X: alpha)', async () => {
    const data = new Uint8Array(
      await sharp({ create: { width: 20, height: 30, channels: 4, background: { r: 1, g: 2, b: 3, alpha: 0.5 } } })
        .webp()
        .toBuffer(),
    );
    expect(readImageSize(data)).toEqual({ format: 'webp', width: 20, height: 30 });
  });

  it('reads a huge size from a tiny file without decoding (well under a second; decoding would take far longer)', () => {
    const png = new Uint8Array(33);
    png.set([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52]);
    new DataView(png.buffer).setUint32(16, 100_000);
    new DataView(png.buffer).setUint32(20, 100_000);
    const started = performance.now();
    expect(readImageSize(png)).toEqual({ format: 'png', width: 100_000, height: 100_000 });
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it('refuses what is none of the four formats, and malformed or cut headers, with a reason', () => {
    const refused = (bytes: number[] | string) =>
      outcome(typeof bytes === 'string' ? new TextEncoder().encode(bytes) : new Uint8Array(bytes));
    expect(refused('')).toEqual({ refused: 'not a PNG, JPEG, GIF or WebP header' });
    expect(refused('<svg xmlns="http://www.w3.org/2000/svg"/>')).toEqual({ refused: 'not a PNG, JPEG, GIF or WebP header' });
    expect(refused([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0])).toMatchObject({
      refused: expect.stringMatching(/^PNG: the header is cut short/),
    });
    expect(refused([0xff, 0xd8, 0xff, 0xda, 0, 2])).toMatchObject({ refused: expect.stringMatching(/before a frame header/) });
    expect(refused([0xff, 0xd8, 0xff, 0xe0, 0, 1])).toMatchObject({ refused: expect.stringMatching(/has length 1/) });
    expect(refused([0xff, 0xd8, 0xff, 0xe0, 0x40, 0])).toMatchObject({ refused: expect.stringMatching(/ends before a frame header/) });
    expect(refused('GIF89a\0\0\x05\0')).toEqual({ refused: 'GIF header: the size is 0×5' });
    expect(refused('RIFF\0\0\0\0WEBPXXXX')).toMatchObject({ refused: expect.stringMatching(/unknown first chunk/) });
  });

  it('property: every prefix of a real file is a size or an ImageHeaderError, never another exception', async () => {
    const files = await Promise.all(FORMATS.map((f) => encoded(f, 33, 17)));
    fc.assert(
      fc.property(fc.constantFrom(...files), fc.nat(), (file, cut) => {
        const data = file.subarray(0, cut % (file.length + 1));
        const got = outcome(data);
        if ('size' in got) expect(got.size).toMatchObject({ width: 33, height: 17 });
      }),
      { numRuns: 2000 },
    );
  });

  it('property: random bytes after any magic number never crash the reader and never give a size of 0', () => {
    const magic = fc.constantFrom(
      [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a],
      [0xff, 0xd8, 0xff],
      [0x47, 0x49, 0x46, 0x38, 0x39, 0x61],
      [0x52, 0x49, 0x46, 0x46, 1, 2, 3, 4, 0x57, 0x45, 0x42, 0x50],
      [],
    );
    fc.assert(
      fc.property(magic, fc.uint8Array({ maxLength: 200 }), (head, rest) => {
        const data = new Uint8Array([...head, ...rest]);
        const got = outcome(data);
        if ('size' in got) {
          expect(got.size.width).toBeGreaterThan(0);
          expect(got.size.height).toBeGreaterThan(0);
          expect(got.size.format).toBe(sniffImageFormat(data));
        }
      }),
      { numRuns: 5000 },
    );
  });

  it('property: a JPEG walk over random segments ends (no loop), whatever the lengths say', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 0xc0, max: 0xfe }), fc.integer({ min: 0, max: 0xffff })), { maxLength: 30 }),
        (segments) => {
          const bytes = [0xff, 0xd8];
          for (const [marker, length] of segments) bytes.push(0xff, marker, length >> 8, length & 0xff, 1, 2, 3, 4, 5, 6, 7);
          outcome(new Uint8Array(bytes));
        },
      ),
    );
  });
});
