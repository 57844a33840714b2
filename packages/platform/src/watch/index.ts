export * from './watch-conversation.ts';
