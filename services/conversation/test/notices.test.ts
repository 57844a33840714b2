/**
 * The gateway's notices (LlmResponseEvent.notices, e.g. thinking left out of a tool loop) reach
 * the user as `notice` events of the conversation's stream, and never the model: nothing is
 * stored for them and the next request's history does not hold them (docs/state-machine.md,
 * "Responses").
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { MessageType, StateKind } from '@bedrock/contracts';
import { text, textOf, usage } from './support/blocks.ts';
import { startHarness, type Harness } from './support/harness.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ label: 'notices' });
});
afterAll(async () => {
  await h?.close();
});

it('a notice is a notification for the user, not a message for the model', async () => {
  const NOTICE = 'Thinking is off until your next message: the API takes no thinking in this tool loop.';
  const id = await h.createConversation();
  await h.client().sendMessage({ conversationId: id, text: 'work' });
  await h.respond(await h.llmJob(id), { usage: usage(100, 10), content: [text('done')], notices: [NOTICE] });
  await h.waitState(id, StateKind.IDLE);

  const notices = (await h.notifications(id)).flatMap((e) => (e.kind.case === 'notice' ? [e.kind.value.text] : []));
  expect(notices).toEqual([NOTICE]);
  expect((await h.get(id)).messages.map((m) => MessageType[m.type])).toEqual(['USER', 'AGENT']);

  await h.client().sendMessage({ conversationId: id, text: 'more' });
  const next = await h.llmJob(id, 1);
  expect(next.messages.map((m) => textOf(m.content)).join('\n')).not.toContain(NOTICE);
});
