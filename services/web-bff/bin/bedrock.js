#!/usr/bin/env node
// `bedrock` CLI: runs the TypeScript sources through tsx (no build step), see docs/cli.md.
import { register } from 'tsx/esm/api';

register();
await import('../src/cli/main.ts');
