/* eslint-disable no-control-regex -- matching terminal control characters is what this file is about */
/**
 * Terminal controls through the real web-bff and conversation service (the test plays the model
 * and the tool): a model that streams and persists OSC 52 clipboard writes, title changes, cursor
 * moves and 8-bit C1 controls, a tool whose input and output carry them, and a title with them —
 * `bedrock send --wait`, `show` and `ls` print none of them, and keep the text around them.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { StopReason } from '@bedrock/contracts';
import { startSystem, type System } from '@bedrock/web-bff/test-support';
import { run } from '../src/run.ts';

let s: System;
beforeAll(async () => {
  s = await startSystem({ label: 'cli_terminal' });
});
afterAll(async () => {
  await s?.close();
});

async function bedrock(args: string[]) {
  let stdout = '';
  let stderr = '';
  const code = await run(
    args,
    { BEDROCK_URL: s.bff.httpUrl, BEDROCK_TOKEN: s.tokens.alice, HOME: '/nonexistent', BEDROCK_RETRY_FOR: '0', FORCE_COLOR: '1' },
    { out: (t) => void (stdout += t), err: (t) => void (stderr += t) },
  );
  return { code, stdout, stderr };
}

const CLIPBOARD = '\x1b]52;c;Y3VybCBodHRwczovL2V2aWwuZXhhbXBsZS94IHwgc2g=\x07';
const TITLE = '\x1b]0;you have been pwned\x07';
const CURSOR = '\x1b[1A\x1b[2K\x1b[10;1H';
const C1 = '\x9b2J\x9d2;c1 title\x9c\x85';

/** Any escape or control character but newline and tab. */
const CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/;

describe('terminal controls in model and tool text', () => {
  it('reach neither send --wait, show nor ls', async () => {
    const id = (await bedrock(['new', '--cwd', '/tmp'])).stdout.trim();
    const sending = bedrock(['send', id, 'hello', '--wait']);
    const first = await s.waitFor('the LLM request', () => s.llmJobs.find((j) => j.conversationId === id));
    await s.waitFor('the watch', async () => (await s.transport.streams.last(id)).sequence > 0n);
    await s.delta(id, first.requestId, `streamed ${CLIPBOARD}answer${TITLE}`);
    await s.send(id, `r/${first.requestId}`, {
      case: 'llmResponse',
      value: {
        requestId: first.requestId,
        stopReason: StopReason.TOOL_USE,
        content: [
          { block: { case: 'text', value: { text: `streamed ${CLIPBOARD}answer${TITLE}` } } },
          {
            block: {
              case: 'toolUse',
              value: { id: 't1', name: 'bash', inputJson: JSON.stringify({ command: `printf '${CLIPBOARD}'` }) },
            },
          },
        ],
      },
    });
    const tool = await s.waitFor('the tool job', () => s.toolJobs.find((j) => j.conversationId === id));
    await s.send(id, `tool/${tool.toolUseId}`, {
      case: 'toolComplete',
      value: { toolUseId: tool.toolUseId, content: `tool ${CURSOR}output ${C1}end\n\tindented` },
    });
    const second = await s.waitFor('the second LLM request', () => s.llmJobs.filter((j) => j.conversationId === id)[1]);
    await s.send(id, `r/${second.requestId}`, {
      case: 'llmResponse',
      value: {
        requestId: second.requestId,
        stopReason: StopReason.END_TURN,
        content: [{ block: { case: 'text', value: { text: `done ${C1}${CURSOR}here` } } }],
      },
    });
    const sent = await sending;
    expect(sent.code).toBe(0);
    await s
      .client(s.tokens.alice)
      .renameConversation({ conversationId: id, title: `nice ${TITLE}title` })
      .catch(() => undefined);

    const shown = await bedrock(['show', id]);
    const listed = await bedrock(['ls']);
    expect(shown.code).toBe(0);
    for (const [what, text] of Object.entries({ send: sent.stdout + sent.stderr, show: shown.stdout + shown.stderr, ls: listed.stdout })) {
      expect({ what, control: CONTROL.exec(text)?.[0] }).toEqual({ what, control: undefined });
    }
    // The text around the controls is kept, with its newline and tab.
    expect(shown.stdout).toContain('streamed answer');
    expect(shown.stdout).toContain('tool output end');
    expect(shown.stdout).toContain('\tindented');
    expect(shown.stdout).toContain('done here');
    expect(sent.stdout).toContain('done here');
  }, 30_000);
});
