/**
 * Primes the cancel path at startup. The first abort of a streaming fetch in a process pays
 * one-time initialisation (undici's abort machinery, source maps for the stack of the abort
 * error): ~100 ms measured here, which would otherwise land on the first user's cancel and
 * break the "abort at once" promise (REQ-BED-005). One aborted request against a throwaway
 * local server takes that cost before any job is taken.
 */
import type Anthropic from '@anthropic-ai/sdk';
import { startMessagesApiServer } from '@bedrock/offline-model';

export async function warmUpAbortPath(client: Anthropic): Promise<void> {
  const server = await startMessagesApiServer();
  try {
    server.enqueue({ kind: 'message', content: [{ type: 'text', text: 'warm-up' }], fault: { type: 'stall', afterEvents: 3 } });
    const controller = new AbortController();
    const stream = await client
      .withOptions({ baseURL: server.url, apiKey: 'warm-up', maxRetries: 0 })
      .messages.create(
        { model: 'warm-up', max_tokens: 1, stream: true, messages: [{ role: 'user', content: 'warm-up' }] },
        { signal: controller.signal },
      );
    for await (const event of stream) {
      if (event.type === 'content_block_start') controller.abort();
    }
  } finally {
    await server.close();
  }
}
