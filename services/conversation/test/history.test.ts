/**
 * The LLM request is built from the persisted history: images included (in every later
 * request too), error messages left out, and a valid tool_use/tool_result chain after
 * cancels, errors, approvals and mode changes.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ErrorKind, MessageType, Role, StateKind, StopReason } from '@bedrock/contracts';
import { chainProblems, shape, text, toolUse, type LlmJob } from './support/blocks.ts';
import { startHarness, type Harness } from './support/harness.ts';
import { tinyJpeg, tinyPng } from './support/images.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ label: 'history' });
});
afterAll(async () => {
  await h?.close();
});

// Real images: SendMessage decodes each one.
let PNG: Uint8Array;
let JPEG: Uint8Array;
beforeAll(async () => {
  [PNG, JPEG] = await Promise.all([tinyPng(), tinyJpeg()]);
});

function images(job: LlmJob) {
  return job.messages.flatMap((m) => m.content.flatMap((b) => (b.block.case === 'image' ? [b.block.value] : [])));
}

describe('history sent to the model', () => {
  it('includes the images of user messages, in this and every later request', async () => {
    const id = await h.createConversation();
    const sent = await h.client().sendMessage({
      conversationId: id,
      text: 'what is in these?',
      images: [
        { mediaType: 'image/png', data: PNG },
        { mediaType: 'image/jpeg', data: JPEG },
      ],
    });
    expect(sent.message!.content.map((b) => b.block.case)).toEqual(['text', 'image', 'image']);
    const first = await h.llmJob(id);
    expect(shape(first)).toEqual([['text', 'image', 'image']]);
    expect(images(first).map((i) => [i.mediaType, Buffer.from(i.data).toString('hex')])).toEqual([
      ['image/png', Buffer.from(PNG).toString('hex')],
      ['image/jpeg', Buffer.from(JPEG).toString('hex')],
    ]);
    await h.respond(first, { content: [text('A header and a marker.')] });
    await h.waitState(id, StateKind.IDLE);

    // An image on its own is a message too.
    await h.client().sendMessage({ conversationId: id, images: [{ mediaType: 'image/png', data: PNG }] });
    const second = await h.llmJob(id, 1);
    expect(shape(second)).toEqual([['text', 'image', 'image'], ['text'], ['image']]);
    expect(images(second)).toHaveLength(3);
    const stored = (await h.get(id)).messages;
    expect(stored[2]!.content.map((b) => b.block.case)).toEqual(['image']);
  });

  it('stays a valid chain through cancels, errors, approvals and mode changes', async () => {
    const id = await h.createConversation();
    const c = h.client();
    const reply = async (index: number, value: Parameters<Harness['respond']>[1]) => {
      const job = await h.llmJob(id, index);
      await h.respond(job, value);
      return job;
    };

    // Turn 1: two tools, cancelled during the first.
    await c.sendMessage({ conversationId: id, text: 'one' });
    await reply(0, {
      stopReason: StopReason.TOOL_USE,
      content: [text('a'), toolUse('a1', 'bash', { command: 'x' }), toolUse('a2', 'bash', { command: 'y' })],
    });
    await h.toolJob(id, 'a1');
    await c.cancel({ conversationId: id });
    // Turn 2: an error the user sees but the model does not.
    await c.sendMessage({ conversationId: id, text: 'two' });
    const errored = await h.llmJob(id, 1);
    await h.fail(errored, { kind: ErrorKind.INVALID_REQUEST, retryable: false, message: 'Bad request: prompt too long' });
    await h.waitState(id, StateKind.ERROR);
    // Turn 3: an upgrade with a tool behind it, approved; a downgrade while that tool runs.
    await c.sendMessage({ conversationId: id, text: 'three' });
    await reply(2, {
      stopReason: StopReason.TOOL_USE,
      content: [toolUse('u1', 'request_mode_upgrade', { reason: 'write' }), toolUse('p1', 'patch', { path: '/tmp/f', patches: [] })],
    });
    await h.waitState(id, StateKind.AWAITING_MODE_APPROVAL);
    await c.respondToModeUpgrade({ conversationId: id, approve: true });
    const patch = await h.toolJob(id, 'p1');
    await c.downgradeMode({ conversationId: id });
    await h.complete(patch, { content: 'patched' });
    // Turn 3 ends; turn 4 starts.
    await reply(3, { content: [text('Done with three.')] });
    await h.waitState(id, StateKind.IDLE);
    await c.sendMessage({ conversationId: id, text: 'four' });
    const last = await h.llmJob(id, 4);

    expect((await h.get(id)).messages.map((m) => MessageType[m.type])).toEqual([
      'USER',
      'AGENT',
      'TOOL',
      'TOOL', // one: cancelled
      'USER',
      'ERROR', // two
      'USER',
      'AGENT',
      'TOOL',
      'SYSTEM',
      'SYSTEM',
      'TOOL',
      'AGENT', // three
      'USER', // four
    ]);
    const turns = last.messages.map((m) => [
      m.role === Role.USER ? 'user' : 'assistant',
      ...m.content.map((b) =>
        b.block.case === 'text'
          ? `text:${b.block.value.text.slice(0, 40)}`
          : b.block.case === 'toolUse'
            ? `use:${b.block.value.id}`
            : b.block.case === 'toolResult'
              ? `result:${b.block.value.toolUseId}`
              : b.block.case,
      ),
    ]);
    expect(turns).toEqual([
      ['user', 'text:one'],
      ['assistant', 'text:a', 'use:a1', 'use:a2'],
      ['user', 'result:a1', 'result:a2', 'text:two', 'text:three'],
      ['assistant', 'use:u1', 'use:p1'],
      ['user', 'result:u1', 'result:p1', 'text:[System notice] Mode changed to Unrestri', 'text:[System notice] Mode changed to Restrict'],
      ['assistant', 'text:Done with three.'],
      ['user', 'text:four'],
    ]);
    expect(JSON.stringify(last.messages)).not.toContain('prompt too long');
    for (const job of h.llmJobsOf(id)) expect(chainProblems(job)).toEqual([]);
  });
});

it('sent only valid tool_use/tool_result chains to the model', () => {
  expect(h.chainProblems()).toEqual([]);
});
