/**
 * Images for the provider (REQ-BED-013): base64 with the right media type, within the
 * Messages API's limits. Larger images are downscaled (sharp) rather than sent to fail;
 * images that cannot be decoded, or that stay too large even after shrinking, are rejected
 * with an error that says which image and which limit.
 */
import { createHash } from 'node:crypto';
import sharp, { type Metadata } from 'sharp';
import { ImageHeaderError, readImageSize, sniffImageFormat } from '@bedrock/contracts/image-size';
import { sentence } from './sentences.ts';

/** The media types the Messages API accepts. */
export const SUPPORTED_IMAGE_TYPES = ['image/jpeg', 'image/png', 'image/gif', 'image/webp'] as const;
export type ImageMediaType = (typeof SUPPORTED_IMAGE_TYPES)[number];

export interface ImageLimits {
  /** Largest base64-encoded image the API accepts, bytes. Default 5 MiB (API limit). */
  readonly maxBase64Bytes: number;
  /** Largest width or height the API accepts, px. Default 8000 (API limit). */
  readonly maxDimensionPx: number;
  /** With more than `manyImagesThreshold` images in one request the API's limit drops to this, px. Default 2000. */
  readonly manyImagesMaxDimensionPx: number;
  /** Default 20 (API rule). */
  readonly manyImagesThreshold: number;
  /**
   * Long edge the gateway downscales to before sending, px; the API would downscale larger
   * images itself, so sending them only costs upload time. Default 1568; 0 sends images
   * at full size (within the hard limits above).
   */
  readonly targetLongEdgePx: number;
  /**
   * Largest image (width × height, read from its header before anything is decoded) the gateway
   * decodes to resize; a larger one is not sent (its note says why). Images of user messages were
   * bounded by the conversation service already; this bounds those of tool results. Default 100,000,000.
   */
  readonly maxInputPixels: number;
}

export const DEFAULT_IMAGE_LIMITS: ImageLimits = {
  maxBase64Bytes: 5 * 1024 * 1024,
  maxDimensionPx: 8000,
  manyImagesMaxDimensionPx: 2000,
  manyImagesThreshold: 20,
  targetLongEdgePx: 1568,
  maxInputPixels: 100_000_000,
};

/** An image that cannot be sent; `message` is safe to show to the user. */
export class ImageRejectedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ImageRejectedError';
  }
}

export interface PreparedImage {
  readonly mediaType: ImageMediaType;
  /** Base64 of the bytes to send. */
  readonly data: string;
  readonly width: number;
  readonly height: number;
  readonly resized: boolean;
}

/** Where an image sits in the request, for error messages. */
export interface ImageContext {
  /** Images in the whole request (the API lowers its size limit above a threshold). */
  readonly imageCount: number;
  /** e.g. "image 1 of message 3". */
  readonly label: string;
}

const FORMAT_TO_TYPE: Record<string, ImageMediaType> = { jpeg: 'image/jpeg', png: 'image/png', gif: 'image/gif', webp: 'image/webp' };

const base64Length = (bytes: number) => 4 * Math.ceil(bytes / 3);

/**
 * A small cache of prepared images: the whole history is re-sent on every turn, and
 * decoding and resizing the same screenshot each time would dominate the gateway's CPU.
 */
export class ImageCache {
  readonly #entries = new Map<string, PreparedImage>();
  constructor(private readonly capacity = 64) {}
  get(key: string): PreparedImage | undefined {
    const hit = this.#entries.get(key);
    if (hit) {
      this.#entries.delete(key);
      this.#entries.set(key, hit);
    }
    return hit;
  }
  set(key: string, value: PreparedImage): void {
    this.#entries.set(key, value);
    while (this.#entries.size > this.capacity) {
      const oldest = this.#entries.keys().next().value;
      if (oldest === undefined) break;
      this.#entries.delete(oldest);
    }
  }
}

export async function prepareImage(
  image: { readonly mediaType: string; readonly data: Uint8Array },
  context: ImageContext,
  limits: ImageLimits = DEFAULT_IMAGE_LIMITS,
  cache?: ImageCache,
): Promise<PreparedImage> {
  const declared = image.mediaType.trim().toLowerCase();
  if (!(SUPPORTED_IMAGE_TYPES as readonly string[]).includes(declared)) {
    throw new ImageRejectedError(
      `${context.label}: media type "${image.mediaType}" is not supported; use one of ${SUPPORTED_IMAGE_TYPES.join(', ')}.`,
    );
  }
  if (image.data.byteLength === 0) throw new ImageRejectedError(`${context.label} is empty.`);
  const hardEdge = context.imageCount > limits.manyImagesThreshold ? limits.manyImagesMaxDimensionPx : limits.maxDimensionPx;
  const maxEdge = limits.targetLongEdgePx > 0 ? Math.min(hardEdge, limits.targetLongEdgePx) : hardEdge;
  const key = cache ? `${createHash('sha256').update(image.data).digest('hex')}:${maxEdge}:${limits.maxBase64Bytes}` : '';
  const cached = cache?.get(key);
  if (cached) return cached;

  const input = Buffer.from(image.data.buffer, image.data.byteOffset, image.data.byteLength);
  // The size from the header first, without decoding: one too large is refused before libvips
  // allocates anything, and libvips may not go past what the header claims.
  // (Data that is none of the four formats goes on to libvips' header read, which names what it is.)
  let claimed = limits.maxInputPixels;
  if (sniffImageFormat(image.data) !== null)
    try {
      const size = readImageSize(image.data);
      claimed = size.width * size.height;
      if (claimed > limits.maxInputPixels) {
        throw new ImageRejectedError(
          `${context.label} is ${size.width}x${size.height} px (${claimed} pixels); the gateway decodes at most ${limits.maxInputPixels} pixels per image.`,
        );
      }
    } catch (err) {
      if (!(err instanceof ImageHeaderError)) throw err;
      throw new ImageRejectedError(sentence(`${context.label} could not be decoded as ${declared}: ${err.message}`));
    }
  let meta: Metadata;
  try {
    meta = await sharp(input, { limitInputPixels: claimed }).metadata();
  } catch (err) {
    throw new ImageRejectedError(sentence(`${context.label} could not be decoded as ${declared}: ${(err as Error).message}`));
  }
  // The API rejects an image whose bytes do not match its declared type; trust the bytes.
  const actual = meta.format ? FORMAT_TO_TYPE[meta.format] : undefined;
  if (!actual || !meta.width || !meta.height) {
    throw new ImageRejectedError(
      `${context.label} is ${meta.format ?? 'not a recognised image'}; only ${SUPPORTED_IMAGE_TYPES.join(', ')} can be sent to the model.`,
    );
  }
  const { width, height } = meta;
  let prepared: PreparedImage;
  if (width <= maxEdge && height <= maxEdge && base64Length(input.byteLength) <= limits.maxBase64Bytes) {
    prepared = { mediaType: actual, data: input.toString('base64'), width, height, resized: false };
  } else {
    prepared = await shrink(input, actual, width, height, maxEdge, limits, context);
  }
  cache?.set(key, prepared);
  return prepared;
}

/**
 * Downscales to fit `maxEdge` in the original format (GIF becomes PNG: one frame), then, while
 * still over the byte limit, re-encodes as JPEG at lower quality and smaller sizes.
 */
async function shrink(
  input: Buffer,
  type: ImageMediaType,
  width: number,
  height: number,
  maxEdge: number,
  limits: ImageLimits,
  context: ImageContext,
): Promise<PreparedImage> {
  let edge = Math.min(maxEdge, Math.max(width, height));
  const attempts: Array<{ format: 'same' | 'jpeg'; quality: number; scale: number }> = [
    { format: 'same', quality: 85, scale: 1 },
    { format: 'jpeg', quality: 80, scale: 1 },
    { format: 'jpeg', quality: 70, scale: 0.75 },
    { format: 'jpeg', quality: 60, scale: 0.75 },
    { format: 'jpeg', quality: 60, scale: 0.5 },
  ];
  let lastSize = 0;
  for (const attempt of attempts) {
    edge = Math.max(1, Math.floor(edge * attempt.scale));
    let pipeline = sharp(input, { limitInputPixels: width * height }).resize({
      width: edge,
      height: edge,
      fit: 'inside',
      withoutEnlargement: true,
    });
    let mediaType: ImageMediaType;
    if (attempt.format === 'jpeg' || type === 'image/jpeg') {
      pipeline = pipeline.flatten({ background: '#ffffff' }).jpeg({ quality: attempt.quality, mozjpeg: true });
      mediaType = 'image/jpeg';
    } else if (type === 'image/webp') {
      pipeline = pipeline.webp({ quality: attempt.quality });
      mediaType = 'image/webp';
    } else {
      pipeline = pipeline.png({ compressionLevel: 9 });
      mediaType = 'image/png';
    }
    const { data, info } = await pipeline.toBuffer({ resolveWithObject: true });
    lastSize = base64Length(data.byteLength);
    if (lastSize <= limits.maxBase64Bytes) {
      return { mediaType, data: data.toString('base64'), width: info.width, height: info.height, resized: true };
    }
  }
  throw new ImageRejectedError(
    `${context.label} (${width}x${height} px) is still ${lastSize} bytes base64-encoded after downscaling; ` +
      `the model provider accepts at most ${limits.maxBase64Bytes} bytes per image.`,
  );
}

/**
 * Images the provider refused (by content), so later turns of the conversation send the note
 * at once instead of a request that is sure to fail. Per process, bounded (least recently
 * used dropped first); a replica that has not seen the refusal learns it from its own 400.
 */
export class RefusedImages {
  readonly #entries = new Map<string, string>();
  constructor(private readonly capacity = 256) {}
  static key(base64: string): string {
    return createHash('sha256').update(base64).digest('hex');
  }
  /** The provider's reason, if it refused this image (base64 as sent). */
  get(base64: string): string | undefined {
    const key = RefusedImages.key(base64);
    const reason = this.#entries.get(key);
    if (reason !== undefined) {
      this.#entries.delete(key);
      this.#entries.set(key, reason);
    }
    return reason;
  }
  remember(base64: string, reason: string): void {
    const key = RefusedImages.key(base64);
    this.#entries.delete(key);
    this.#entries.set(key, reason);
    while (this.#entries.size > this.capacity) {
      const oldest = this.#entries.keys().next().value;
      if (oldest === undefined) break;
      this.#entries.delete(oldest);
    }
  }
}

/** Where in the request the provider says the refused image is (indexes of the request as sent). */
export interface ImageLocation {
  readonly message: number;
  readonly block: number;
  /** The image's index inside a tool_result's content, when it sits there. */
  readonly nested?: number;
}

/** An image refusal read from a 400 invalid_request_error message. */
export interface ImageRefusal {
  /** Absent when the message does not say which image (e.g. "Could not process image"). */
  readonly at?: ImageLocation;
  /** The provider's words, without the location, e.g. "image exceeds 5 MB maximum: 5316784 bytes > 5242880 bytes". */
  readonly reason: string;
}

const IMAGE_PATH = /messages\.(\d+)\.content\.(\d+)(?:\.content\.(\d+))?\.image(?:\.[\w.]+)?\s*:\s*/;

/**
 * Reads an invalid_request_error message of the Messages API as an image refusal, e.g.
 * `messages.2.content.1.image.source.base64: image exceeds 5 MB maximum` or
 * `Could not process image`. Undefined when the message is not about an image.
 */
export function parseImageRefusal(message: string): ImageRefusal | undefined {
  const match = IMAGE_PATH.exec(message);
  if (match) {
    const reason = message.slice(match.index + match[0].length).trim() || message.trim();
    const at: ImageLocation = {
      message: Number(match[1]),
      block: Number(match[2]),
      ...(match[3] !== undefined ? { nested: Number(match[3]) } : {}),
    };
    return { at, reason };
  }
  return /\bimages?\b/i.test(message) ? { reason: message.trim() } : undefined;
}

/** What the model reads where an image the provider refused was. */
export function refusedImageNote(reason: string): string {
  return `[image removed: the model provider refused it: ${reason}]`;
}

/** What the model reads where an image that could not be prepared for sending was. */
export function unsendableImageNote(reason: string): string {
  return `[image removed: it could not be sent to the model: ${reason}]`;
}
