/** Real images for tests (SendMessage decodes every image it is given). */
import { randomBytes } from 'node:crypto';
import sharp from 'sharp';

const solid = (width: number, height: number) => sharp({ create: { width, height, channels: 3, background: { r: 40, g: 120, b: 200 } } });

/** A small valid PNG. */
export const tinyPng = async (): Promise<Uint8Array> => new Uint8Array(await solid(4, 3).png().toBuffer());
/** A small valid JPEG. */
export const tinyJpeg = async (): Promise<Uint8Array> => new Uint8Array(await solid(4, 3).jpeg().toBuffer());
/** A PNG of random pixels, uncompressed: about `width * height * 3` bytes. */
export const noisePng = async (width: number, height: number): Promise<Uint8Array> =>
  new Uint8Array(
    await sharp(randomBytes(width * height * 3), { raw: { width, height, channels: 3 } })
      .png({ compressionLevel: 0 })
      .toBuffer(),
  );
