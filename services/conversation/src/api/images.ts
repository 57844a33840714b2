/**
 * Images of SendMessage are checked in two steps (docs/conversation.md, "Input validation"):
 * their headers before admission (`checkImageHeaders`: format, pixels per image and per message;
 * nothing decoded), then every pixel once admitted (`checkImageDecodes`, sharp/libvips, bounded),
 * so a truncated or corrupt file fails here rather than at the model's API on every later turn.
 */
import { Code, ConnectError } from '@connectrpc/connect';
import sharp, { type Metadata } from 'sharp';
import { ImageHeaderError, readImageSize, type ImageSize } from '@bedrock/contracts/image-size';
import { LIMITS } from './input-limits.ts';

// libvips' operation cache would keep decoded inputs (up to 50 MB and 20 files by default) alive
// after the call: nothing here is decoded twice, so it only holds memory.
sharp.cache(false);

/** sharp's format name of each accepted media type. */
const FORMAT_OF: Readonly<Record<string, string>> = { 'image/png': 'png', 'image/jpeg': 'jpeg', 'image/gif': 'gif', 'image/webp': 'webp' };

/** sharp/libvips' reason, first line only and bounded. */
function reason(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  const line = text.split('\n', 1)[0]!.trim();
  return line.length > 200 ? `${line.slice(0, 200)}…` : line;
}

const count = (n: number) => n.toLocaleString('en-US');

/**
 * Step 1, before admission: reads every image's header; throws INVALID_ARGUMENT when one is not
 * the image its media type names, is malformed, is over the per-image limit
 * ({@link LIMITS.maxImagePixels}), or the images together are over `pixelBudget` (the per-message
 * budget, BEDROCK_IMAGE_PIXELS_PER_MESSAGE). Answers the sizes (in order) for step 2. Cheap: no
 * image is decoded (`@bedrock/contracts/image-size`: microseconds, no allocation), so a message
 * over the budget is refused before it meets the user's limits and before anything is decoded.
 */
export function checkImageHeaders(
  images: readonly { readonly mediaType: string; readonly data: Uint8Array }[],
  pixelBudget: number,
): ImageSize[] {
  let total = 0;
  const sizes = images.map((image, index) => {
    const label = `image ${index + 1}`;
    let size: ImageSize;
    try {
      size = readImageSize(image.data);
    } catch (err) {
      if (!(err instanceof ImageHeaderError)) throw err;
      throw new ConnectError(
        `${label}: the data is not a valid ${image.mediaType}: it does not decode (${err.message})`,
        Code.InvalidArgument,
      );
    }
    if (size.format !== FORMAT_OF[image.mediaType]) {
      throw new ConnectError(`${label}: the data is not a valid ${image.mediaType} (it decodes as ${size.format})`, Code.InvalidArgument);
    }
    const pixels = size.width * size.height;
    if (pixels > LIMITS.maxImagePixels) {
      throw new ConnectError(
        `${label} is ${size.width}×${size.height} pixels; the limit is ${count(LIMITS.maxImagePixels)} pixels`,
        Code.InvalidArgument,
      );
    }
    total += pixels;
    return size;
  });
  if (total > pixelBudget) {
    const each = sizes.map((s, i) => `image ${i + 1}: ${s.width}×${s.height}`).join(', ');
    throw new ConnectError(
      `the images of this message have ${count(total)} pixels together; the limit is ${count(pixelBudget)} pixels per message (${each}): send fewer or smaller images (a screenshot scaled to at most 1568 pixels on its long edge loses nothing the model sees)`,
      Code.InvalidArgument,
    );
  }
  return sizes;
}

/** One decode at a time in this process: a decode uses libvips' threads, which are as many as the cores. */
let decoding: Promise<unknown> = Promise.resolve();
function oneAtATime<T>(work: () => Promise<T>): Promise<T> {
  const mine = decoding.then(work, work);
  decoding = mine.catch(() => undefined);
  return mine;
}

/**
 * Step 2, after admission: throws INVALID_ARGUMENT unless `data` decodes as the image `mediaType`
 * declares, every pixel of its first frame, with the size its header claims (`size`, from step 1;
 * read again when not given); `index` is 0-based, messages say "image 1" for the first. Bounded:
 * libvips may not allocate for more pixels than the header claimed (`limitInputPixels`), one
 * decode runs at a time in this process, and libvips keeps no cache of the inputs
 * (`sharp.cache(false)`), so memory returns once the call is answered.
 */
export async function checkImageDecodes(index: number, mediaType: string, data: Uint8Array, size?: ImageSize): Promise<void> {
  const label = `image ${index + 1}`;
  const header = size ?? checkImageHeaders([{ mediaType, data }], Number.MAX_SAFE_INTEGER)[0]!;
  const input = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  // Fail on truncated data and on errors; tolerate the minor warnings many real files carry.
  // libvips may not go past the pixels the header claimed (a file lying in its header fails).
  const options = { failOn: 'truncated', limitInputPixels: Math.max(1, header.width * header.height) } as const;
  await oneAtATime(async () => {
    let meta: Metadata;
    try {
      meta = await sharp(input, options).metadata();
    } catch (err) {
      throw new ConnectError(`${label}: the data is not a valid ${mediaType}: it does not decode (${reason(err)})`, Code.InvalidArgument);
    }
    if (meta.format !== FORMAT_OF[mediaType]) {
      throw new ConnectError(
        `${label}: the data is not a valid ${mediaType} (it decodes as ${meta.format ?? 'an unknown format'})`,
        Code.InvalidArgument,
      );
    }
    if (meta.width !== header.width || meta.height !== header.height) {
      throw new ConnectError(
        `${label}: the data is not a valid ${mediaType}: its header says ${header.width}×${header.height} pixels, its decoder ${meta.width ?? 0}×${meta.height ?? 0}`,
        Code.InvalidArgument,
      );
    }
    try {
      // stats() reads every pixel of the first frame through libvips' pipeline.
      await sharp(input, options).stats();
    } catch (err) {
      throw new ConnectError(`${label}: the data is not a valid ${mediaType}: it does not decode (${reason(err)})`, Code.InvalidArgument);
    }
  });
}
