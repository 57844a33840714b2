/** Thinking and web tools: the settings flags, their use at creation, and `bedrock settings`. */
import { toJson } from '@bufbuild/protobuf';
import { ConversationSchema, ServerTool, ThinkingLevel } from '@bedrock/contracts';
import { parseThinking } from '@bedrock/agent-view/agent-content';
import { json, type Ctx } from './commands.ts';
import { EXIT, UsageError } from './exit-codes.ts';
import { renderSettings } from './render-conversation.ts';

/** Thinking and web tools asked for on the command line (--thinking, --web-search, --no-web-search, ...). */
export interface SettingsFlags {
  /** UNSPECIFIED: not given. */
  readonly thinking: ThinkingLevel;
  readonly enable: readonly ServerTool[];
  readonly disable: readonly ServerTool[];
}

/** Reads the settings flags; a level that is not one, or a tool both turned on and off, is a usage error. */
export function parseSettingsFlags(values: {
  thinking?: string | undefined;
  'web-search'?: boolean | undefined;
  'web-fetch'?: boolean | undefined;
  'no-web-search'?: boolean | undefined;
  'no-web-fetch'?: boolean | undefined;
}): SettingsFlags {
  let thinking = ThinkingLevel.UNSPECIFIED;
  if (values.thinking !== undefined) {
    const level = parseThinking(values.thinking);
    if (level === undefined) throw new UsageError(`--thinking ${values.thinking}: use off, low, medium, high or max`);
    thinking = level;
  }
  const enable: ServerTool[] = [];
  const disable: ServerTool[] = [];
  for (const [flag, tool] of [
    ['web-search', ServerTool.WEB_SEARCH],
    ['web-fetch', ServerTool.WEB_FETCH],
  ] as const) {
    const on = values[flag] === true;
    const off = values[`no-${flag}`] === true;
    if (on && off) throw new UsageError(`--${flag} and --no-${flag} contradict each other`);
    if (on) enable.push(tool);
    if (off) disable.push(tool);
  }
  return { thinking, enable, disable };
}

function hasSettings(flags: SettingsFlags | undefined): flags is SettingsFlags {
  return flags !== undefined && (flags.thinking !== ThinkingLevel.UNSPECIFIED || flags.enable.length > 0 || flags.disable.length > 0);
}

/** The creation request's settings: the level (UNSPECIFIED: the deployment's default) and the tools turned on. */
export function creationSettings(flags: SettingsFlags | undefined): { thinking: ThinkingLevel; serverTools: ServerTool[] } {
  return { thinking: flags?.thinking ?? ThinkingLevel.UNSPECIFIED, serverTools: [...(flags?.enable ?? [])] };
}

/**
 * Changes a conversation's thinking and web tools: only what the flags name (the tool list is
 * the current one with the named tools turned on or off). Returns the conversation's settings
 * after the change, or as they are when nothing was asked.
 */
export async function applySettings(ctx: Ctx, id: string, flags: SettingsFlags | undefined) {
  if (!hasSettings(flags)) return (await ctx.client.getConversation({ conversationId: id })).conversation!;
  let serverTools: { tools: ServerTool[] } | undefined;
  if (flags.enable.length || flags.disable.length) {
    const current = (await ctx.client.getConversation({ conversationId: id })).conversation!.serverTools;
    const tools = [...new Set([...current, ...flags.enable])].filter((t) => !flags.disable.includes(t));
    serverTools = { tools };
  }
  // Settings are set, not added to: a repeat after a lost answer changes nothing more.
  const res = await ctx.retry(() =>
    ctx.client.updateConversationSettings({ conversationId: id, thinking: flags.thinking, ...(serverTools ? { serverTools } : {}) }),
  );
  return res.conversation!;
}

/** `bedrock settings ID [--thinking L] [--web-search|--no-web-search] [--web-fetch|--no-web-fetch]`. */
export async function settings(ctx: Ctx, id: string, flags: SettingsFlags): Promise<number> {
  const c = await applySettings(ctx, id, flags);
  ctx.output.out(ctx.json ? json(toJson(ConversationSchema, c)) : renderSettings(c));
  return EXIT.ok;
}
