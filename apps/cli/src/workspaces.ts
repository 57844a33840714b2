/**
 * `bedrock ws new|ls|rm`: the caller's workspaces, through web-bff's WorkspaceService
 * (docs/cli.md, "Workspaces"). `ws rm` asks on a terminal and elsewhere needs --yes, as `bedrock rm`.
 */
import { createInterface } from 'node:readline/promises';
import { toJson } from '@bufbuild/protobuf';
import { timestampMs } from '@bufbuild/protobuf/wkt';
import { relativeTime } from '@bedrock/agent-view/format';
import {
  CreateWorkspaceResponseSchema,
  DeleteWorkspaceResponseSchema,
  ListWorkspacesResponseSchema,
  type Workspace,
} from '@bedrock/contracts';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { CreateWorkspaceRequestSchema } from '@bedrock/contracts';
import type { Ctx } from './commands.ts';
import { EXIT, UsageError } from './exit-codes.ts';
import type { OptionValues } from './usage.ts';

/** Options that only `ws` takes. */
export const WS_FLAGS = ['git', 'copy', 'with-conversations'] as const;

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

/** Bytes in binary units, one decimal below 10 ("0 B", "512 B", "1.5 KiB", "12 MiB", "10 GiB"). */
export function humanBytes(n: bigint | number): string {
  let value = Number(n);
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  if (unit === 0) return `${value} B`;
  const text = value < 10 ? value.toFixed(1).replace(/\.0$/, '') : String(Math.round(value));
  return `${text} ${UNITS[unit]}`;
}

const count = (n: bigint | number) => Number(n).toLocaleString('en-US');

/** The rows of `ws ls`: name, size (of the quota), files (of the quota), conversations, last use, origin. */
export function renderWorkspaces(workspaces: readonly Workspace[], now = Date.now()): string {
  const rows = [
    ['NAME', 'SIZE', 'FILES', 'CONVERSATIONS', 'LAST USE', 'ORIGIN'],
    ...workspaces.map((w) => [
      w.name,
      w.quotaBytes > 0n ? `${humanBytes(w.sizeBytes)} / ${humanBytes(w.quotaBytes)}` : humanBytes(w.sizeBytes),
      w.quotaInodes > 0n ? `${count(w.inodes)} / ${count(w.quotaInodes)}` : count(w.inodes),
      String(w.conversations),
      w.lastUsedAt ? relativeTime(timestampMs(w.lastUsedAt), now) : '-',
      w.origin,
    ]),
  ];
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) => `${r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  ')}\n`).join('');
}

function need(args: string[], count: number, what: string): string[] {
  if (args.length !== count) throw new UsageError(`expected ${what}; bedrock help ws shows its usage`);
  return args;
}

async function confirm(question: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  const answer = await rl.question(question).finally(() => rl.close());
  return /^y(es)?$/i.test(answer.trim());
}

export async function ws(ctx: Ctx, rest: string[], values: OptionValues): Promise<number> {
  const [sub, ...args] = rest;
  const only = (allowed: readonly (typeof WS_FLAGS)[number][]) => {
    const extra = WS_FLAGS.find((f) => values[f] !== undefined && values[f] !== false && !allowed.includes(f));
    if (extra) throw new UsageError(`--${extra} does not apply to ws ${sub}; bedrock help ws shows its usage`);
  };
  const line = (value: unknown) => `${JSON.stringify(value)}\n`;
  switch (sub) {
    case 'new': {
      only(['git', 'copy']);
      const [name] = need(args, 1, 'the new workspace\'s name (a-z, 0-9, ".", "_", "-")');
      if (values.git !== undefined && values.copy !== undefined)
        throw new UsageError(`a workspace is a clone (--git URL) or a copy (--copy NAME), not both; bedrock help ws shows its usage`);
      const source: MessageInitShape<typeof CreateWorkspaceRequestSchema>['source'] =
        values.git !== undefined
          ? { case: 'gitUrl', value: values.git }
          : values.copy !== undefined
            ? { case: 'copyOf', value: values.copy }
            : { case: undefined };
      // One request id for every attempt: a retry after a lost answer gets the same workspace.
      const res = await ctx.retry((requestId) => ctx.workspaces.createWorkspace({ name: name!, source, requestId }));
      const w = res.workspace!;
      ctx.output.out(
        ctx.json ? line(toJson(CreateWorkspaceResponseSchema, res)) : `created workspace ${w.name} (${w.origin}): ${w.path}\n`,
      );
      return EXIT.ok;
    }
    case 'ls': {
      only([]);
      need(args, 0, 'no arguments after ws ls');
      const res = await ctx.workspaces.listWorkspaces({});
      if (ctx.json) {
        ctx.output.out(line(toJson(ListWorkspacesResponseSchema, res)));
        return EXIT.ok;
      }
      ctx.output.out(
        res.workspaces.length
          ? renderWorkspaces(res.workspaces)
          : 'no workspaces yet (bedrock ws new NAME; bedrock new makes "default" on first use)\n',
      );
      ctx.output.out(`quota: ${res.quota}\n`);
      return EXIT.ok;
    }
    case 'rm': {
      only(['with-conversations']);
      const [name] = need(args, 1, 'the name of the workspace to delete');
      const withConversations = values['with-conversations'] === true;
      if (!values.yes) {
        if (!process.stdin.isTTY)
          throw new UsageError(`ws rm ${name}: not on a terminal, so nothing asks; pass --yes to delete without asking`);
        const w = (await ctx.workspaces.listWorkspaces({})).workspaces.find((x) => x.name === name || x.id === name);
        const n = w?.conversations ?? 0;
        const theirs = n
          ? withConversations
            ? ` and the ${n} conversation${n === 1 ? '' : 's'} in it`
            : ` (${n} conversation${n === 1 ? ' uses' : 's use'} it: refused unless --with-conversations)`
          : '';
        if (!(await confirm(`Delete workspace ${name}, every file in it${theirs}? This cannot be undone. [y/N] `))) {
          ctx.output.err('nothing deleted\n');
          return EXIT.ok;
        }
      }
      const res = await ctx.retry((requestId) => ctx.workspaces.deleteWorkspace({ workspace: name!, withConversations, requestId }));
      if (ctx.json) {
        ctx.output.out(line(toJson(DeleteWorkspaceResponseSchema, res)));
      } else {
        ctx.output.out(`deleted workspace ${name} (${res.workspaceId})\n`);
        for (const id of res.deletedConversationIds) ctx.output.out(`deleted conversation ${id}\n`);
      }
      return EXIT.ok;
    }
    default:
      throw new UsageError(`expected ws new NAME, ws ls or ws rm NAME; bedrock help ws shows its usage`);
  }
}
