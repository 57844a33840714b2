/**
 * web-bff passes the caller's W3C trace context to the conversation service, so the LLM job
 * of the user's turn carries the client's trace (one user turn = one trace).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startSystem, type System } from './support/system.ts';
import { traceHeaders } from '../src/upstream/trace-headers.ts';

const PARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

describe('trace context through web-bff', () => {
  let s: System;
  beforeAll(async () => {
    s = await startSystem({ label: 'trace' });
  }, 60_000);
  afterAll(async () => {
    await s?.close();
  }, 30_000);

  it("forwards the client's traceparent and tracestate into the turn's jobs", async () => {
    const alice = s.client(s.tokens.alice);
    const headers = { traceparent: PARENT, tracestate: 'client=web' };
    const conv = (await alice.createConversation({ cwd: '/tmp' }, { headers })).conversation!;
    await alice.sendMessage({ conversationId: conv.id, text: 'trace me' }, { headers });
    const job = await s.waitFor('the LLM job', () => s.llmJobs.find((j) => j.conversationId === conv.id));
    expect(job.traceContext).toEqual({ traceparent: PARENT, tracestate: 'client=web' });
  });

  it('a call without trace context still starts one trace for its turn', async () => {
    const alice = s.client(s.tokens.alice);
    const conv = (await alice.createConversation({ cwd: '/tmp' })).conversation!;
    await alice.sendMessage({ conversationId: conv.id, text: 'no trace' });
    const job = await s.waitFor('the LLM job', () => s.llmJobs.find((j) => j.conversationId === conv.id));
    expect(job.traceContext.traceparent).toMatch(/^00-[\da-f]{32}-[\da-f]{16}-01$/);
  });

  it('traceHeaders keeps only the two W3C headers, and not oversized ones', () => {
    expect(traceHeaders(new Headers({ traceparent: PARENT, tracestate: 'a=b', authorization: 'Bearer x' }))).toEqual({
      traceparent: PARENT,
      tracestate: 'a=b',
    });
    expect(traceHeaders(new Headers({ tracestate: 'x'.repeat(600) }))).toEqual({});
  });
});
