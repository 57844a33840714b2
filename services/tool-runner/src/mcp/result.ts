/**
 * An MCP `tools/call` result as a tool_result the model reads: text as it is, images and audio
 * as a note (tool results are text here), resource links and embedded resources by URI,
 * structured content as JSON when no text block already carries it, all under the same head
 * and tail limits as a command's output.
 */
import { OutputCapture } from '../process/output-capture.ts';
import type { OutputCaptureOptions } from '../process/output-capture.ts';

/** The parts of a CallToolResult this reads (the SDK's type is wider and looser). */
export interface McpCallResult {
  readonly content?: readonly Record<string, unknown>[];
  readonly structuredContent?: unknown;
  readonly isError?: boolean;
}

const str = (v: unknown): string => (typeof v === 'string' ? v : '');
/** Bytes a base64 string decodes to. */
const base64Bytes = (data: string): number => Math.floor((data.length * 3) / 4) - (data.endsWith('==') ? 2 : data.endsWith('=') ? 1 : 0);

function blockText(block: Record<string, unknown>): string {
  switch (block.type) {
    case 'text':
      return str(block.text);
    case 'image':
    case 'audio':
      return `[${block.type}: ${str(block.mimeType) || 'unknown type'}, ${base64Bytes(str(block.data))} bytes; not shown: MCP ${block.type} content is not passed to the model]`;
    case 'resource_link': {
      const extra = [str(block.mimeType), str(block.description)].filter(Boolean).join('; ');
      return `[resource link: ${str(block.name) || str(block.uri)} <${str(block.uri)}>${extra ? ` (${extra})` : ''}]`;
    }
    case 'resource': {
      const r = (block.resource ?? {}) as Record<string, unknown>;
      if (typeof r.text === 'string') return `[resource <${str(r.uri)}>]\n${r.text}`;
      return `[resource <${str(r.uri)}>: ${str(r.mimeType) || 'binary'}, ${base64Bytes(str(r.blob))} bytes; not shown]`;
    }
    default:
      return `[unsupported MCP content block "${String(block.type)}"]`;
  }
}

export interface MappedResult {
  readonly content: string;
  readonly isError: boolean;
  readonly display: { readonly mcp: true; readonly blocks: number; readonly totalBytes: number; readonly truncated: boolean };
}

export function mapCallResult(result: McpCallResult, capture: OutputCaptureOptions): MappedResult {
  const blocks = result.content ?? [];
  const parts = blocks.map(blockText);
  // Servers should also put structured content in a text block (the MCP spec, for clients
  // without it); only when no text block came is it shown as JSON.
  if (result.structuredContent !== undefined && !blocks.some((b) => b.type === 'text')) {
    parts.push(`Structured content:\n${JSON.stringify(result.structuredContent, null, 2)}`);
  }
  const text = parts.length === 0 ? '(no content)' : parts.join('\n');
  const out = new OutputCapture(capture);
  out.push(Buffer.from(text, 'utf8'));
  return {
    content: out.render(),
    isError: result.isError === true,
    display: { mcp: true, blocks: blocks.length, totalBytes: out.totalBytes, truncated: out.truncated },
  };
}
