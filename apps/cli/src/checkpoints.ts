/**
 * Checkpoints in the CLI (docs/cli.md, "Checkpoints"), through web-bff's CheckpointService:
 * `bedrock rewind ID --at SEQ [--files | --chat]` puts the conversation's files and/or history
 * back to just after message SEQ; `bedrock diff ID [--at SEQ]` shows what changed in its
 * workspace since message SEQ (default: since the latest checkpoint).
 */
import { toJson } from '@bufbuild/protobuf';
import { createClient } from '@connectrpc/connect';
import {
  CheckpointService,
  FileChangeKind,
  GetWorkspaceDiffResponseSchema,
  RewindConversationResponseSchema,
  RewindScope,
  type GetWorkspaceDiffResponse,
} from '@bedrock/contracts';
import type { Ctx } from './commands.ts';
import { apiTransport } from './connection.ts';
import { EXIT, UsageError } from './exit-codes.ts';
import { USAGE, type OptionValues } from './usage.ts';

const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;

/** `--at SEQ` of rewind and diff: a message sequence (0 allowed: before the first message). */
export function messagePoint(at: string | undefined): bigint | undefined {
  if (at === undefined) return undefined;
  if (!/^(0|[1-9][0-9]{0,15})$/.test(at)) throw new UsageError(`--at ${at}: give the sequence number of a message (see bedrock show)`);
  return BigInt(at);
}

const KIND: Record<number, string> = {
  [FileChangeKind.ADDED]: 'added',
  [FileChangeKind.MODIFIED]: 'modified',
  [FileChangeKind.DELETED]: 'deleted',
  [FileChangeKind.MODE]: 'mode',
  [FileChangeKind.SYMLINK]: 'symlink',
};

/** One line per change (`modified  src/a.ts`), each text file's unified diff after it. */
export function renderDiff(diff: GetWorkspaceDiffResponse): string {
  if (diff.changes.length === 0) return 'no changes\n';
  const out: string[] = [];
  for (const c of diff.changes) {
    const mode = c.kind === FileChangeKind.MODE ? ` (${c.oldMode.toString(8)} -> ${c.newMode.toString(8)})` : '';
    out.push(
      `${(KIND[c.kind] ?? 'changed').padEnd(8)}  ${c.path}${c.type === 'directory' ? '/' : ''}${mode}${c.binary ? ' (binary)' : ''}\n`,
    );
    if (c.unifiedDiff) out.push(c.unifiedDiff.endsWith('\n') ? c.unifiedDiff : `${c.unifiedDiff}\n`);
  }
  if (!diff.complete) out.push('… more changes not shown (the list stops at 10,000)\n');
  return out.join('');
}

export async function checkpointCommand(
  ctx: Ctx,
  command: 'rewind' | 'diff',
  rest: string[],
  values: OptionValues,
  env: NodeJS.ProcessEnv,
): Promise<number> {
  if (rest.length !== 1) throw new UsageError(`expected a conversation id\n\n${USAGE}`);
  const id = rest[0]!;
  const client = createClient(CheckpointService, apiTransport(env));
  if (command === 'rewind') {
    const at = messagePoint(values.at);
    if (at === undefined) throw new UsageError(`rewind needs --at SEQ: the last message to keep (see bedrock show)\n\n${USAGE}`);
    if (values.files && values.chat) throw new UsageError(`choose one of --files and --chat (neither: both)\n\n${USAGE}`);
    const scope = values.files ? RewindScope.FILES : values.chat ? RewindScope.HISTORY : RewindScope.BOTH;
    // A retry after a lost answer carries the same request id: the rewind is not done twice.
    const res = await ctx.retry((requestId) => client.rewindConversation({ conversationId: id, atMessage: at, scope, requestId }));
    if (ctx.json) ctx.output.out(json(toJson(RewindConversationResponseSchema, res)));
    else {
      const files =
        res.filesFromTurn > 0n
          ? `files as before message ${res.filesFromTurn}`
          : scope === RewindScope.HISTORY
            ? ''
            : 'files unchanged (nothing ran since)';
      const history = scope === RewindScope.FILES ? '' : `${res.messagesRemoved} message${res.messagesRemoved === 1 ? '' : 's'} removed`;
      ctx.output.out(`rewound ${id} to message ${at}: ${[files, history].filter(Boolean).join('; ')}\n`);
    }
    return EXIT.ok;
  }
  const at = messagePoint(values.at);
  const res = await client.getWorkspaceDiff({ conversationId: id, from: at ?? 0n, to: 0n });
  ctx.output.out(ctx.json ? json(toJson(GetWorkspaceDiffResponseSchema, res)) : renderDiff(res));
  return EXIT.ok;
}
