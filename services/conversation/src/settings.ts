/**
 * Per-conversation model settings: the extended-thinking level and the provider-run
 * ("server") tools. Stored on the conversation row, passed on every LLM request
 * (docs/conversation.md, "Thinking and server tools").
 */
import { ServerTool as PServerTool, ThinkingLevel as PThinkingLevel } from '@bedrock/contracts';

export const THINKING_LEVELS = ['off', 'low', 'medium', 'high', 'xhigh', 'max'] as const;
export type ThinkingSetting = (typeof THINKING_LEVELS)[number];

export const SERVER_TOOLS = ['web_search', 'web_fetch'] as const;
export type ServerToolName = (typeof SERVER_TOOLS)[number];

const THINKING_TO_PROTO: Record<ThinkingSetting, PThinkingLevel> = {
  off: PThinkingLevel.OFF,
  low: PThinkingLevel.LOW,
  medium: PThinkingLevel.MEDIUM,
  high: PThinkingLevel.HIGH,
  xhigh: PThinkingLevel.XHIGH,
  max: PThinkingLevel.MAX,
};

const SERVER_TOOLS_TO_PROTO: Record<ServerToolName, PServerTool> = {
  web_search: PServerTool.WEB_SEARCH,
  web_fetch: PServerTool.WEB_FETCH,
};

export function thinkingToProto(level: ThinkingSetting): PThinkingLevel {
  return THINKING_TO_PROTO[level];
}

/** null for UNSPECIFIED (use the default) and for a value this service does not know. */
export function thinkingFromProto(level: PThinkingLevel): ThinkingSetting | null {
  const found = THINKING_LEVELS.find((l) => THINKING_TO_PROTO[l] === level);
  return found ?? null;
}

export function serverToolToProto(tool: ServerToolName): PServerTool {
  return SERVER_TOOLS_TO_PROTO[tool];
}

export function isThinkingSetting(value: string): value is ThinkingSetting {
  return (THINKING_LEVELS as readonly string[]).includes(value);
}

export function isServerToolName(value: string): value is ServerToolName {
  return (SERVER_TOOLS as readonly string[]).includes(value);
}

/** What a stored row holds, made safe: an unknown level (a newer replica's) counts as high, unknown tools are dropped. */
export function storedThinking(value: string): ThinkingSetting {
  return isThinkingSetting(value) ? value : 'high';
}

export function storedServerTools(values: readonly string[]): ServerToolName[] {
  return values.filter(isServerToolName);
}

/** Thrown for a request that asks for settings the deployment does not allow; the message names the fix. */
export class SettingsError extends Error {}

/**
 * The server tools a request asks for, checked against the deployment's allow-list
 * (BEDROCK_SERVER_TOOLS): in the order of SERVER_TOOLS, each once.
 */
export function resolveServerTools(requested: readonly PServerTool[], allowed: readonly ServerToolName[]): ServerToolName[] {
  const out = new Set<ServerToolName>();
  for (const value of requested) {
    const name = SERVER_TOOLS.find((t) => SERVER_TOOLS_TO_PROTO[t] === value);
    if (!name) throw new SettingsError(`server_tools: ${PServerTool[value] ?? value} is not a server tool; use WEB_SEARCH or WEB_FETCH.`);
    if (!allowed.includes(name)) {
      const now = allowed.length === 0 ? 'none are allowed' : `it allows ${allowed.join(', ')}`;
      throw new SettingsError(
        `server_tools: ${name} is not allowed on this deployment (BEDROCK_SERVER_TOOLS; ${now}). Ask the operator to add it to BEDROCK_SERVER_TOOLS, or leave it out.`,
      );
    }
    out.add(name);
  }
  return SERVER_TOOLS.filter((t) => out.has(t));
}
