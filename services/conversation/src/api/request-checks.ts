/**
 * The checks and small answers every handler of the conversation API shares: who calls (the
 * user web-bff names), ids, request keys, images, working directories and thinking levels. Bad
 * input is INVALID_ARGUMENT with a message naming the field and the limit.
 */
import { stat } from 'node:fs/promises';
import { Code, ConnectError, type HandlerContext } from '@connectrpc/connect';
import { toBinary, type DescMessage, type MessageShape } from '@bufbuild/protobuf';
import { ThinkingLevel, type ImageAttachment, USER_HEADER, CLIENT_HEADER, cleanClient, rejectionError } from '@bedrock/contracts';
import { servicePeer, USER_IDENTITY_PEER } from '@bedrock/platform/server';
import type { ApplyResult } from '../apply/applier.ts';
import type { AuditActor } from '../store/audit-store.ts';
import { requestFingerprint, requestIdProblem, type RequestKey } from '../store/request-outcomes.ts';
import { thinkingFromProto, type ThinkingSetting } from '../settings.ts';
import { checkImageDecodes, checkImageHeaders } from './images.ts';
import type { ImageSize } from '@bedrock/contracts/image-size';
import { LIMITS } from './input-limits.ts';

export const MODEL_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,127}$/;

/** The user web-bff acts for. The header is believed only alongside web-bff's own service credential. */
export function userOf(ctx: HandlerContext): string {
  const peer = servicePeer(ctx);
  if (peer !== USER_IDENTITY_PEER) {
    throw new ConnectError(
      peer === undefined
        ? 'missing service credential: call this service through web-bff'
        : `service ${peer} may not act for a user: only ${USER_IDENTITY_PEER} names users (${USER_HEADER}); call this service through web-bff`,
      Code.Unauthenticated,
    );
  }
  const user = ctx.requestHeader.get(USER_HEADER)?.trim();
  if (!user) throw new ConnectError(`missing ${USER_HEADER} header: call this service through web-bff`, Code.Unauthenticated);
  return user;
}

/** Who asks, for the audit log: the user and the client web-bff saw (CLIENT_HEADER). */
export function actorOf(ctx: HandlerContext): AuditActor {
  return { userId: userOf(ctx), client: cleanClient(ctx.requestHeader.get(CLIENT_HEADER) ?? '') };
}

export function requireId(id: string, field = 'conversation_id'): string {
  if (!id.trim()) throw new ConnectError(`${field} is required`, Code.InvalidArgument);
  if (id.length > 512) throw new ConnectError(`${field} is too long (at most 512 characters)`, Code.InvalidArgument);
  return id;
}

export function notFound(id: string): ConnectError {
  return new ConnectError(`conversation ${id} not found`, Code.NotFound);
}

/** The key of a request that carries a client request id; undefined without one. */
export function requestKeyOf<D extends DescMessage>(
  user: string,
  scope: string,
  method: string,
  schema: D,
  request: MessageShape<D> & { requestId: string },
): RequestKey | undefined {
  if (!request.requestId) return undefined;
  const problem = requestIdProblem(request.requestId);
  if (problem) throw new ConnectError(problem, Code.InvalidArgument);
  // The body without its id: a retry must repeat it byte for byte (same text, same images).
  const body = toBinary(schema, { ...request, requestId: '' });
  return { ownerId: user, scope, requestId: request.requestId, method, fingerprint: requestFingerprint(method, body) };
}

/** The error a refused user action answers: an empty message is malformed whatever the state; the rest depend on it. */
export function rejectedError(result: Extract<ApplyResult, { kind: 'rejected' }>): ConnectError {
  const code = result.rejection.code === 'empty_message' ? Code.InvalidArgument : Code.FailedPrecondition;
  return rejectionError(result.rejection, code);
}

export type Settled = Extract<ApplyResult, { kind: 'applied' | 'noop' }>;

/**
 * Checks count, media types, byte sizes and headers (pixels, against `pixelBudget` together):
 * cheap, before the user's limits. Answers the step that decodes every image (images.ts), run
 * once the message is admitted. Nothing is stored if one fails.
 */
export function validateImages(images: readonly ImageAttachment[], pixelBudget: number): () => Promise<void> {
  if (images.length > LIMITS.maxImages) {
    throw new ConnectError(`too many images: ${images.length} (at most ${LIMITS.maxImages} per message)`, Code.InvalidArgument);
  }
  images.forEach((image, i) => {
    if (!LIMITS.imageMediaTypes.includes(image.mediaType)) {
      throw new ConnectError(
        `image ${i + 1}: media type ${JSON.stringify(image.mediaType)} is not supported (use ${LIMITS.imageMediaTypes.join(', ')})`,
        Code.InvalidArgument,
      );
    }
    if (image.data.length === 0) throw new ConnectError(`image ${i + 1} is empty`, Code.InvalidArgument);
    if (image.data.length > LIMITS.maxImageBytes) {
      throw new ConnectError(
        `image ${i + 1} is ${image.data.length} bytes; the limit is ${LIMITS.maxImageBytes} bytes (${LIMITS.maxImageBytes / 1024 / 1024} MiB)`,
        Code.InvalidArgument,
      );
    }
  });
  const sizes: ImageSize[] = checkImageHeaders(images, pixelBudget);
  return async () => {
    // One at a time: decoding is the expensive part, and the first bad image ends the call.
    for (const [i, image] of images.entries()) await checkImageDecodes(i, image.mediaType, image.data, sizes[i]);
  };
}

/**
 * The working directory must be a directory this service can see: the tools run in it, and a
 * conversation rooted nowhere fails at its first tool call. (The tool-runners must see the
 * same paths; BEDROCK_CHECK_CWD turns this off where this service does not mount them.)
 */
export async function requireDirectory(cwd: string): Promise<void> {
  const why = await directoryProblem(cwd);
  if (why)
    throw new ConnectError(`cwd ${JSON.stringify(cwd)} ${why}: give the absolute path of an existing directory`, Code.InvalidArgument);
}

/** Why `cwd` is not a directory this service can see ("does not exist", …), or null when it is one. */
export async function directoryProblem(cwd: string): Promise<string | null> {
  try {
    return (await stat(cwd)).isDirectory() ? null : 'is not a directory';
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === 'ENOENT'
      ? 'does not exist'
      : code === 'ENOTDIR'
        ? 'does not exist (a part of the path is not a directory)'
        : code === 'EACCES'
          ? 'cannot be reached (permission denied)'
          : `cannot be checked (${code ?? String(err)})`;
  }
}

/** A requested thinking level: null for UNSPECIFIED; INVALID_ARGUMENT for a value that is none of the levels. */
export function thinkingOf(level: ThinkingLevel): ThinkingSetting | null {
  if (level === ThinkingLevel.UNSPECIFIED) return null;
  const found = thinkingFromProto(level);
  if (!found)
    throw new ConnectError(`thinking: ${level} is not a thinking level; use OFF, LOW, MEDIUM, HIGH or MAX.`, Code.InvalidArgument);
  return found;
}
