/**
 * Builders for what the test "gateway" and "runner" send, and an independent check of the
 * history in LlmRequestJobs (written here from the Messages API rules, not from the core's
 * own checker, so the test can disagree with the code).
 */
import { Role, type ContentBlock, type LlmMessage, type LlmRequestJob } from '@bedrock/contracts';

/**
 * An LLM request job as the played gateway runs it: the claim-check job with the history it
 * names (fetched from ConversationHistoryService, as the llm-gateway does).
 */
export type LlmJob = LlmRequestJob & { readonly messages: LlmMessage[] };

export const usage = (
  input = 100,
  output = 20,
  cacheRead = 0,
  cacheCreation = 0,
  extra: { thinking?: number; searches?: number; fetches?: number } = {},
) => ({
  inputTokens: BigInt(input),
  outputTokens: BigInt(output),
  cacheReadInputTokens: BigInt(cacheRead),
  cacheCreationInputTokens: BigInt(cacheCreation),
  thinkingTokens: BigInt(extra.thinking ?? 0),
  webSearchRequests: BigInt(extra.searches ?? 0),
  webFetchRequests: BigInt(extra.fetches ?? 0),
});

export const text = (t: string) => ({ block: { case: 'text' as const, value: { text: t } } });
/** Text that cites sources: the provider's `citations` array, JSON. */
export const citedText = (t: string, citations: unknown[]) => ({
  block: { case: 'text' as const, value: { text: t, citationsJson: JSON.stringify(citations) } },
});
export const thinking = (t: string, signature: string) => ({ block: { case: 'thinking' as const, value: { thinking: t, signature } } });
export const redactedThinking = (data: string) => ({ block: { case: 'redactedThinking' as const, value: { data } } });
/** A provider-run tool's block, verbatim: `json` is kept as the exact text given. */
export const serverTool = (blockType: string, json: string) => ({
  block: { case: 'serverTool' as const, value: { blockType, blockJson: json } },
});

export const toolUse = (id: string, name: string, input: object) => ({
  block: { case: 'toolUse' as const, value: { id, name, inputJson: JSON.stringify(input) } },
});

/** The text of a content block list (text blocks joined). */
export function textOf(content: readonly ContentBlock[]): string {
  return content.map((b) => (b.block.case === 'text' ? b.block.value.text : '')).join('');
}

/** Block kinds per turn, e.g. [['text'], ['text', 'toolUse'], ['toolResult']]. */
export function shape(job: LlmJob): string[][] {
  return job.messages.map((m) => m.content.map((b) => b.block.case ?? 'none'));
}

/** Every tool_result block of the request, in order. */
export function toolResults(job: LlmJob) {
  return job.messages.flatMap((m) => m.content.flatMap((b) => (b.block.case === 'toolResult' ? [b.block.value] : [])));
}

/** A paused turn: an assistant turn holding a provider-run tool's block, sent back as it is to resume. */
function isPausedTurn(turn: LlmMessage): boolean {
  return turn.role === Role.ASSISTANT && turn.content.some((b) => b.block.case === 'serverTool');
}

/**
 * Problems the Messages API would reject: the first turn is a user turn, the last a user turn
 * or a paused assistant turn (holding server-tool blocks: the API resumes it),
 * roles alternate, every assistant tool_use is answered by exactly one tool_result, in the
 * same order, at the start of the next user turn, tool_results appear nowhere else, tool_use
 * ids are unique, and no turn is empty.
 */
export function chainProblems(job: LlmJob): string[] {
  const problems: string[] = [];
  const where = `${job.requestId}`;
  const turns = job.messages;
  if (turns.length === 0) return [`${where}: no messages`];
  if (turns[0]!.role !== Role.USER) problems.push(`${where}: first turn is not a user turn`);
  const last = turns[turns.length - 1]!;
  if (last.role !== Role.USER && !isPausedTurn(last)) problems.push(`${where}: last turn is neither a user turn nor a paused turn`);
  const seen = new Set<string>();
  turns.forEach((turn, i) => {
    if (turn.content.length === 0) problems.push(`${where}: turn ${i} is empty`);
    if (i > 0 && turns[i - 1]!.role === turn.role) problems.push(`${where}: turns ${i - 1} and ${i} have the same role`);
    const uses = turn.content.flatMap((b) => (b.block.case === 'toolUse' ? [b.block.value.id] : []));
    const results = turn.content.flatMap((b) => (b.block.case === 'toolResult' ? [b.block.value.toolUseId] : []));
    if (turn.role === Role.ASSISTANT) {
      if (results.length) problems.push(`${where}: assistant turn ${i} holds tool_result blocks`);
      for (const id of uses) {
        if (seen.has(id)) problems.push(`${where}: tool_use id ${id} repeated`);
        seen.add(id);
      }
      if (uses.length) {
        const next = turns[i + 1];
        if (!next) {
          problems.push(`${where}: tool_use blocks of turn ${i} are not answered`);
        } else {
          const answered = next.content.flatMap((b) => (b.block.case === 'toolResult' ? [b.block.value.toolUseId] : []));
          if (answered.join(',') !== uses.join(',')) {
            problems.push(`${where}: turn ${i + 1} answers [${answered.join(',')}] but turn ${i} asked [${uses.join(',')}]`);
          }
          const firstOther = next.content.findIndex((b) => b.block.case !== 'toolResult');
          if (firstOther !== -1 && firstOther < answered.length) problems.push(`${where}: tool_results of turn ${i + 1} do not come first`);
        }
      }
    } else {
      if (uses.length) problems.push(`${where}: user turn ${i} holds tool_use blocks`);
      const prevUses = i > 0 ? turns[i - 1]!.content.filter((b) => b.block.case === 'toolUse').length : 0;
      if (results.length && prevUses === 0) problems.push(`${where}: user turn ${i} answers tool_use blocks nobody asked for`);
    }
  });
  return problems;
}
