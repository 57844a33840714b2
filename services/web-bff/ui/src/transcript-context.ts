/** What the transcript's parts read from the conversation around them: its sub-agents' titles and how to fork it. */
import { createContext } from 'preact';
import type { ForkOutcome } from './session.ts';

/**
 * The conversation's sub-agents by id, so a text that names one by its id (the spawn_agents
 * result, an answer quoting it) shows its title instead, linked to its transcript. A new value
 * re-renders the parts that read it, memoised or not.
 */
export interface SubAgentNames {
  readonly parentId: string;
  readonly titles: ReadonlyMap<string, string>;
}
export const SubAgentNamesContext = createContext<SubAgentNames>({ parentId: '', titles: new Map() });

/**
 * Forks the conversation after the message with this sequence (and opens the fork), with its own
 * copy of the workspace's files as they were there when `withFiles`; undefined where forking is
 * not offered.
 */
export type Fork = (atSequence: bigint, withFiles: boolean) => Promise<ForkOutcome>;
export const ForkContext = createContext<Fork | undefined>(undefined);
