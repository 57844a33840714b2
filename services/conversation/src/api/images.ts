/**
 * Images of SendMessage are checked by decoding them, not by their declared media type: a
 * file that is not the image it claims would be stored and then fail every later turn of the
 * conversation (the model's API refuses the request that carries it). Each image must be
 * recognised by sharp (libvips) as the format its media type names, have a size within
 * {@link LIMITS.maxImagePixels}, and decode in full (every pixel of its first frame is read;
 * a truncated or corrupt file fails). Decoding runs on libvips' threads, streaming, so an
 * image costs CPU time but never its full decoded size in memory.
 */
import { Code, ConnectError } from '@connectrpc/connect';
import sharp from 'sharp';
import { LIMITS } from './limits.ts';

/** sharp's format name of each accepted media type. */
const FORMAT_OF: Readonly<Record<string, string>> = { 'image/png': 'png', 'image/jpeg': 'jpeg', 'image/gif': 'gif', 'image/webp': 'webp' };

/** sharp/libvips' reason, first line only and bounded. */
function reason(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  const line = text.split('\n', 1)[0]!.trim();
  return line.length > 200 ? `${line.slice(0, 200)}…` : line;
}

/**
 * Throws INVALID_ARGUMENT unless `data` decodes as the image `mediaType` declares; `index` is
 * 0-based, messages say "image 1" for the first.
 */
export async function checkImageDecodes(index: number, mediaType: string, data: Uint8Array): Promise<void> {
  const label = `image ${index + 1}`;
  const input = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  // Fail on truncated data and on errors; tolerate the minor warnings many real files carry.
  const options = { failOn: 'truncated', limitInputPixels: LIMITS.maxImagePixels } as const;
  let format: string | undefined;
  let width = 0;
  let height = 0;
  try {
    const meta = await sharp(input, { ...options, limitInputPixels: false }).metadata();
    format = meta.format;
    width = meta.width ?? 0;
    height = meta.height ?? 0;
  } catch (err) {
    throw new ConnectError(`${label}: the data is not a valid ${mediaType}: it does not decode (${reason(err)})`, Code.InvalidArgument);
  }
  if (format !== FORMAT_OF[mediaType]) {
    throw new ConnectError(
      `${label}: the data is not a valid ${mediaType} (it decodes as ${format ?? 'an unknown format'})`,
      Code.InvalidArgument,
    );
  }
  if (width * height > LIMITS.maxImagePixels) {
    throw new ConnectError(
      `${label} is ${width}×${height} pixels; the limit is ${LIMITS.maxImagePixels.toLocaleString('en-US')} pixels`,
      Code.InvalidArgument,
    );
  }
  try {
    // stats() reads every pixel of the first frame through libvips' pipeline.
    await sharp(input, options).stats();
  } catch (err) {
    throw new ConnectError(`${label}: the data is not a valid ${mediaType}: it does not decode (${reason(err)})`, Code.InvalidArgument);
  }
}
