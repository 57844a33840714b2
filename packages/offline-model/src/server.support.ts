/**
 * What the local Messages API server tests share: a minimal request, an SSE body parser and a
 * raw POST to /v1/messages (with an x-api-key unless told otherwise).
 */
import type { MessagesApiServer } from './server.ts';

export const request = { model: 'claude-test', max_tokens: 100, messages: [{ role: 'user' as const, content: 'hi' }] };

/** Parses an SSE body into (event, data) pairs. */
export function parseSse(text: string): Array<{ event: string; data: string }> {
  return text
    .split('\n\n')
    .filter((chunk) => chunk.trim())
    .map((chunk) => {
      const event = /^event: (.*)$/m.exec(chunk)?.[1] ?? '';
      const data = /^data: (.*)$/m.exec(chunk)?.[1] ?? '';
      return { event, data };
    });
}

export async function post(server: MessagesApiServer, body: unknown, headers: Record<string, string> = { 'x-api-key': 'k' }) {
  return fetch(`${server.url}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
}
