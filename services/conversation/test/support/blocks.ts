/**
 * Builders for what the test "gateway" and "runner" send, and an independent check of the
 * history in LlmRequestJobs (written here from the Messages API rules, not from the core's
 * own checker, so the test can disagree with the code).
 */
import { Role, type ContentBlock, type LlmRequestJob } from '@bedrock/contracts';

export const usage = (input = 100, output = 20, cacheRead = 0, cacheCreation = 0) => ({
  inputTokens: BigInt(input),
  outputTokens: BigInt(output),
  cacheReadInputTokens: BigInt(cacheRead),
  cacheCreationInputTokens: BigInt(cacheCreation),
});

export const text = (t: string) => ({ block: { case: 'text' as const, value: { text: t } } });

export const toolUse = (id: string, name: string, input: object) => ({
  block: { case: 'toolUse' as const, value: { id, name, inputJson: JSON.stringify(input) } },
});

/** The text of a content block list (text blocks joined). */
export function textOf(content: readonly ContentBlock[]): string {
  return content.map((b) => (b.block.case === 'text' ? b.block.value.text : '')).join('');
}

/** Block kinds per turn, e.g. [['text'], ['text', 'toolUse'], ['toolResult']]. */
export function shape(job: LlmRequestJob): string[][] {
  return job.messages.map((m) => m.content.map((b) => b.block.case ?? 'none'));
}

/** Every tool_result block of the request, in order. */
export function toolResults(job: LlmRequestJob) {
  return job.messages.flatMap((m) => m.content.flatMap((b) => (b.block.case === 'toolResult' ? [b.block.value] : [])));
}

/**
 * Problems the Messages API would reject: the first turn and the last turn are user turns,
 * roles alternate, every assistant tool_use is answered by exactly one tool_result, in the
 * same order, at the start of the next user turn, tool_results appear nowhere else, tool_use
 * ids are unique, and no turn is empty.
 */
export function chainProblems(job: LlmRequestJob): string[] {
  const problems: string[] = [];
  const where = `${job.requestId}`;
  const turns = job.messages;
  if (turns.length === 0) return [`${where}: no messages`];
  if (turns[0]!.role !== Role.USER) problems.push(`${where}: first turn is not a user turn`);
  if (turns[turns.length - 1]!.role !== Role.USER) problems.push(`${where}: last turn is not a user turn`);
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
