/**
 * MCP tools: how a tool of an MCP server is named to the model, and when it may run.
 * Pure, shared by the state machine (which routes `mcp__` calls to the tool-runner), the
 * gateway (which defines them for the model), the tool-runner (which runs them) and the
 * offline model (which calls them by server and tool name). See docs/mcp.md.
 */

/** Every MCP tool's name starts with this; no built-in tool does. */
export const MCP_TOOL_PREFIX = 'mcp__';

/** The Messages API's rule for a tool name. */
export const API_TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/**
 * A server's name: lower-case letters, digits and single hyphens, 1–32 characters. No `_`, so
 * `mcp__<server>__<tool>` always splits at the first `__` after the prefix.
 */
export const MCP_SERVER_NAME = /^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$/;

export function isMcpToolName(name: string): boolean {
  return name.startsWith(MCP_TOOL_PREFIX) && API_TOOL_NAME.test(name);
}

/** The server part of an `mcp__<server>__<tool>` name, or undefined. */
export function mcpServerOf(name: string): string | undefined {
  if (!name.startsWith(MCP_TOOL_PREFIX)) return undefined;
  const rest = name.slice(MCP_TOOL_PREFIX.length);
  const end = rest.indexOf('__');
  if (end <= 0) return undefined;
  const server = rest.slice(0, end);
  return MCP_SERVER_NAME.test(server) ? server : undefined;
}

/** FNV-1a, 32 bits, as 6 base-36 characters: a short stable suffix for names that had to change. */
function shortHash(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(36).padStart(7, '0').slice(-6);
}

/**
 * The model's name for tool `tool` of server `server`: `mcp__<server>__<tool>`. Characters the
 * API does not allow become `_`; a name that had to change or is longer than 64 characters is
 * cut and ends in `_` and a hash of the original tool name, so distinct tools keep distinct names.
 * The runner maps a call back by listing the server's tools and encoding each the same way.
 */
export function mcpToolName(server: string, tool: string): string {
  const head = `${MCP_TOOL_PREFIX}${server}__`;
  const clean = tool.replace(/[^a-zA-Z0-9_-]/g, '_');
  const plain = `${head}${clean}`;
  if (clean === tool && plain.length <= 64 && tool.length > 0) return plain;
  const suffix = `_${shortHash(tool)}`;
  return `${head}${clean.slice(0, Math.max(0, 64 - head.length - suffix.length))}${suffix}`;
}

/** What a server says about a tool (MCP `ToolAnnotations`); absent hints take the spec's defaults. */
export interface McpToolHints {
  readonly readOnlyHint?: boolean;
  readonly destructiveHint?: boolean;
  readonly openWorldHint?: boolean;
}

/**
 * Whether a call may run in the conversation's mode; undefined when it may, else the reason the
 * model reads in the tool_result. Unrestricted runs everything (the server's sandbox is the
 * Unrestricted one). In Restricted mode only a tool that declares `readOnlyHint: true` runs, and
 * only because that claim is trusted: the server's process runs in the Restricted sandbox
 * (read-only, no network), or the operator marked the server trusted. A tool without
 * annotations takes the MCP defaults (not read-only, destructive, open-world): a write.
 */
export function mcpRestrictedRefusal(
  tool: { readonly name: string; readonly hints?: McpToolHints },
  server: { readonly sandboxedRestricted: boolean; readonly trusted: boolean },
  mode: 'restricted' | 'unrestricted',
): string | undefined {
  if (mode === 'unrestricted') return undefined;
  const readOnly = tool.hints?.readOnlyHint === true;
  if (readOnly && (server.sandboxedRestricted || server.trusted)) return undefined;
  const why = readOnly
    ? 'its server is neither sandboxed read-only nor trusted by the operator, so its readOnlyHint is not believed'
    : tool.hints?.readOnlyHint === false
      ? 'the server declares it may write (readOnlyHint: false)'
      : 'the server does not declare it read-only (an MCP tool without readOnlyHint: true counts as one that writes)';
  return `The MCP tool ${tool.name} is not available in Restricted mode: ${why}. Use request_mode_upgrade to ask the user for Unrestricted mode, then call it again.`;
}

/** What the model reads when it calls a tool of a server its user turned off for the conversation. */
export function mcpServerOffMessage(toolName: string, server: string): string {
  return `The MCP tool ${toolName} is not available: the user turned the MCP server "${server}" off for this conversation, so its tools are not offered. Do not call its tools; ask the user to turn it on again if you need it.`;
}

/** A remote server's stored login was refused (revoked or expired): what the user must do. */
export function mcpLoginInvalidMessage(server: string): string {
  return `MCP server ${server}: your login is no longer valid (revoked or expired); run \`bedrock mcp login ${server}\` or log in from the web UI.`;
}

/** A remote server asks for a login the user has not made. */
export function mcpLoginNeededMessage(server: string): string {
  return `MCP server ${server}: it needs you to log in; run \`bedrock mcp login ${server}\` or log in from the web UI.`;
}
