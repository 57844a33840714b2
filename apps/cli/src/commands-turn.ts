/**
 * The commands that talk to the agent: `send` (a message, its text and images; --wait follows
 * the turn), `watch`, and `cancel`, `approve`, `deny`, `downgrade`, `continue`.
 */
import { readFile } from 'node:fs';
import { extname } from 'node:path';
import { toJson } from '@bufbuild/protobuf';
import {
  CancelResponseSchema,
  DeliveryMode,
  DowngradeModeResponseSchema,
  RespondToModeUpgradeResponseSchema,
  TriggerContinuationResponseSchema,
  type ImageAttachment,
} from '@bedrock/contracts';
import { followingRenderer, json, restExit, restLine, type Ctx } from './commands.ts';
import { EXIT, UsageError } from './exit-codes.ts';
import { describeState } from './render-conversation.ts';
import { followTurn, resumingWatch, type ResumeOptions } from './turn.ts';

const MEDIA_TYPES: Record<string, string> = {
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
};

export async function loadImage(path: string): Promise<Omit<ImageAttachment, '$typeName'>> {
  const mediaType = MEDIA_TYPES[extname(path).toLowerCase()];
  if (!mediaType) throw new UsageError(`--image ${path}: use a .png, .jpg, .gif or .webp file`);
  // node:fs, not node:fs/promises: loading that module costs every command a few ms at start.
  const data = await new Promise<Buffer>((done, fail) =>
    readFile(path, (err, bytes) => (err ? fail(new UsageError(`--image ${path}: cannot read the file`)) : done(bytes))),
  );
  return { mediaType, data };
}

/**
 * The text of a message: TEXT as given, `-` for all of stdin, `--file PATH` for a file's
 * contents (so that a long message need not fit in an argument: Linux refuses one over 128 KiB).
 */
export async function messageText(
  text: string | undefined,
  file: string | undefined,
  stdin: NodeJS.ReadableStream = process.stdin,
): Promise<string> {
  if (file !== undefined && text !== undefined) throw new UsageError('give the text or --file PATH, not both');
  let read: string;
  if (file !== undefined) {
    read = await new Promise<string>((done, fail) =>
      readFile(file, 'utf8', (err, t) => (err ? fail(new UsageError(`--file ${file}: cannot read the file`)) : done(t))),
    );
  } else if (text === '-') {
    const chunks: Buffer[] = [];
    for await (const chunk of stdin) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
    read = Buffer.concat(chunks).toString('utf8');
  } else {
    return text ?? '';
  }
  // A file or a pipe ends with a newline that is not part of the message.
  const message = read.replace(/\r?\n$/, '');
  if (!message.trim()) throw new UsageError(`${file !== undefined ? `--file ${file}` : 'stdin'}: the message is empty`);
  return message;
}

const DELIVERY_MODES = { queue: DeliveryMode.QUEUE, steer: DeliveryMode.STEER, interrupt: DeliveryMode.INTERRUPT } as const;

export async function send(
  ctx: Ctx,
  id: string,
  text: string,
  opts: { images: string[]; wait: boolean; delivery?: keyof typeof DELIVERY_MODES | undefined },
): Promise<number> {
  const images = await Promise.all(opts.images.map(loadImage));
  const delivery = opts.delivery ? DELIVERY_MODES[opts.delivery] : DeliveryMode.UNSPECIFIED;
  // One request id for the message, whatever the number of attempts: it is stored once.
  const sendOnce = () => ctx.retry((requestId) => ctx.client.sendMessage({ conversationId: id, text, images, requestId, delivery }));
  // A message that waits (--queue, --steer, --interrupt while busy) has no id yet: follow until the conversation rests.
  const sendIt = async () => (await sendOnce()).message?.id;
  if (!opts.wait) {
    const res = await sendOnce();
    if (ctx.json) {
      ctx.output.out(json({ messageId: res.message?.id ?? '', queuedId: res.queuedId, state: describeState(res.state) }));
      return EXIT.ok;
    }
    // A waiting message prints its queued id (stdout stays one id for scripts; the note goes to stderr).
    ctx.output.out(`${res.message?.id ?? res.queuedId}\n`);
    if (res.queuedId) ctx.output.err(`the agent is busy: the message waits (${opts.delivery}) and is delivered by the server\n`);
    return EXIT.ok;
  }
  const render = followingRenderer(ctx, id);
  const rest = await followTurn({
    client: ctx.client,
    conversationId: id,
    start: sendIt,
    onEvent: render,
    signal: ctx.signal,
    resume: ctx.resume,
  });
  if (!ctx.json && rest) restLine(ctx, rest);
  return restExit(rest);
}

/** Streams a conversation's events until Ctrl-C (exit 130), resuming after disconnects; gives up (exit 4) after the retry budget. */
export async function watch(ctx: Ctx, id: string): Promise<number> {
  const render = followingRenderer(ctx, id);
  let resumed = false;
  let watching = false;
  const resume: ResumeOptions = {
    ...ctx.resume,
    onResume: (notice) => {
      resumed = true;
      ctx.resume?.onResume?.(notice);
    },
  };
  for await (const event of resumingWatch(ctx.client, id, ctx.signal, resume)) {
    if (resumed && !ctx.json) ctx.output.err('· resumed\n');
    resumed = false;
    if (event.kind.case === 'snapshot' && !ctx.json) {
      // A resume before any event is a fresh watch: its snapshot is not announced again.
      const c = event.kind.value.conversation!;
      ctx.following.state = c.state;
      if (!watching) ctx.output.err(`watching ${c.id} (${describeState(c.state)}); Ctrl-C to stop\n`);
      watching = true;
      continue;
    }
    if (event.kind.case === 'heartbeat' && !ctx.json) continue;
    render(event);
  }
  return ctx.signal.aborted ? EXIT.interrupted : EXIT.ok;
}

export async function action(ctx: Ctx, verb: 'cancel' | 'approve' | 'deny' | 'downgrade' | 'continue', id: string): Promise<number> {
  const req = { conversationId: id };
  switch (verb) {
    case 'cancel': {
      const res = await ctx.retry((requestId) => ctx.client.cancel({ ...req, requestId }));
      ctx.output.out(ctx.json ? json(toJson(CancelResponseSchema, res)) : `${describeState(res.state)}\n`);
      break;
    }
    case 'approve':
    case 'deny': {
      const res = await ctx.retry((requestId) => ctx.client.respondToModeUpgrade({ ...req, approve: verb === 'approve', requestId }));
      ctx.output.out(ctx.json ? json(toJson(RespondToModeUpgradeResponseSchema, res)) : `${describeState(res.conversation?.state)}\n`);
      break;
    }
    case 'downgrade': {
      const res = await ctx.retry((requestId) => ctx.client.downgradeMode({ ...req, requestId }));
      ctx.output.out(ctx.json ? json(toJson(DowngradeModeResponseSchema, res)) : `${describeState(res.conversation?.state)}\n`);
      break;
    }
    case 'continue': {
      const res = await ctx.retry((requestId) => ctx.client.triggerContinuation({ ...req, requestId }));
      ctx.output.out(ctx.json ? json(toJson(TriggerContinuationResponseSchema, res)) : `${describeState(res.state)}\n`);
      break;
    }
  }
  return EXIT.ok;
}
