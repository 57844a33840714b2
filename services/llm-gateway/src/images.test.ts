import { describe, it, expect } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import sharp from 'sharp';
import { DEFAULT_IMAGE_LIMITS, ImageCache, ImageRejectedError, prepareImage } from './images.ts';

const ctx = { imageCount: 1, label: 'image 1 of message 1' };
const solid = (width: number, height: number, format: 'png' | 'jpeg' | 'webp' | 'gif' = 'png') => {
  const image = sharp({ create: { width, height, channels: 3, background: { r: 200, g: 40, b: 90 } } });
  return image[format]().toBuffer();
};
/** Random pixels do not compress: a PNG of this many megapixels is about 3 bytes a pixel. */
const noise = (width: number, height: number) =>
  sharp(randomBytes(width * height * 3), { raw: { width, height, channels: 3 } })
    .png({ compressionLevel: 0 })
    .toBuffer();

describe('prepareImage', () => {
  it('sends an image within the limits unchanged, as base64', async () => {
    const png = await solid(800, 600);
    const out = await prepareImage({ mediaType: 'image/png', data: png }, ctx);
    expect(out).toMatchObject({ mediaType: 'image/png', width: 800, height: 600, resized: false });
    expect(Buffer.from(out.data, 'base64').equals(png)).toBe(true);
  });

  it('downscales an image whose long edge exceeds the target, keeping the aspect ratio and format', async () => {
    const out = await prepareImage({ mediaType: 'image/jpeg', data: await solid(4000, 2000, 'jpeg') }, ctx);
    expect(out).toMatchObject({ mediaType: 'image/jpeg', width: 1568, height: 784, resized: true });
    const meta = await sharp(Buffer.from(out.data, 'base64')).metadata();
    expect([meta.format, meta.width, meta.height]).toEqual(['jpeg', 1568, 784]);
  });

  it('applies the API hard limits when the target is off: 8000 px, and 2000 px with more than 20 images', async () => {
    const limits = { ...DEFAULT_IMAGE_LIMITS, targetLongEdgePx: 0 };
    const big = await solid(9000, 100);
    expect((await prepareImage({ mediaType: 'image/png', data: big }, ctx, limits)).width).toBe(8000);
    const medium = await solid(3000, 100);
    expect((await prepareImage({ mediaType: 'image/png', data: medium }, ctx, limits)).resized).toBe(false);
    expect((await prepareImage({ mediaType: 'image/png', data: medium }, { imageCount: 21, label: 'x' }, limits)).width).toBe(2000);
  });

  it('re-encodes an image over the byte limit until it fits', async () => {
    const data = await noise(1200, 1200); // ~4.3 MB raw PNG, ~5.8 MB base64
    expect(4 * Math.ceil(data.byteLength / 3)).toBeGreaterThan(DEFAULT_IMAGE_LIMITS.maxBase64Bytes);
    const out = await prepareImage({ mediaType: 'image/png', data }, ctx);
    expect(out.resized).toBe(true);
    expect(out.data.length).toBeLessThanOrEqual(DEFAULT_IMAGE_LIMITS.maxBase64Bytes);
  });

  it('rejects, with the limit in the message, an image that cannot be made small enough', async () => {
    const data = await noise(600, 600);
    const tiny = { ...DEFAULT_IMAGE_LIMITS, maxBase64Bytes: 200 };
    await expect(prepareImage({ mediaType: 'image/png', data }, ctx, tiny)).rejects.toThrow(
      /image 1 of message 1 .* at most 200 bytes per image/,
    );
  });

  it('rejects unsupported types and undecodable data with a clear error', async () => {
    await expect(prepareImage({ mediaType: 'image/bmp', data: new Uint8Array([1]) }, ctx)).rejects.toThrow(
      /media type "image\/bmp" is not supported; use one of image\/jpeg, image\/png, image\/gif, image\/webp/,
    );
    await expect(prepareImage({ mediaType: 'image/png', data: Buffer.from('not an image') }, ctx)).rejects.toThrow(ImageRejectedError);
    await expect(prepareImage({ mediaType: 'image/png', data: new Uint8Array() }, ctx)).rejects.toThrow(/is empty/);
    const tiff = await sharp({ create: { width: 4, height: 4, channels: 3, background: '#000' } })
      .tiff()
      .toBuffer();
    await expect(prepareImage({ mediaType: 'image/png', data: tiff }, ctx)).rejects.toThrow(/is tiff; only/);
  });

  it('refuses an image over maxInputPixels from its header, without decoding it', async () => {
    // A PNG header claiming 20000 × 20000 pixels, with no pixel data at all.
    const png = Buffer.alloc(33);
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52]).copy(png);
    png.writeUInt32BE(20_000, 16);
    png.writeUInt32BE(20_000, 20);
    png[24] = 8;
    png[25] = 2;
    const started = performance.now();
    await expect(prepareImage({ mediaType: 'image/png', data: png }, ctx)).rejects.toThrow(
      'image 1 of message 1 is 20000x20000 px (400000000 pixels); the gateway decodes at most 100000000 pixels per image.',
    );
    expect(performance.now() - started).toBeLessThan(1_000);
    // A malformed header of a known format is refused as undecodable.
    await expect(prepareImage({ mediaType: 'image/png', data: png.subarray(0, 20) }, ctx)).rejects.toThrow(
      /could not be decoded as image\/png: PNG/,
    );
  });

  it('trusts the bytes over a wrong declared media type', async () => {
    const out = await prepareImage({ mediaType: 'image/png', data: await solid(10, 10, 'webp') }, ctx);
    expect(out.mediaType).toBe('image/webp');
  });

  it('caches prepared images by content', async () => {
    const cache = new ImageCache(2);
    const data = await solid(3000, 3000);
    const first = await prepareImage({ mediaType: 'image/png', data }, ctx, DEFAULT_IMAGE_LIMITS, cache);
    const second = await prepareImage({ mediaType: 'image/png', data: Buffer.from(data) }, ctx, DEFAULT_IMAGE_LIMITS, cache);
    expect(second).toBe(first);
  });
});
