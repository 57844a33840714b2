/**
 * A model-based property test of checkpoints (fast-check): random sequences of workspace operations
 * (`op`) through the product's real tools, run by a real tool-runner over its gRPC API, with
 * checkpoints, rewinds and forks through the same runner's WorkspaceStorageService. A model says
 * what the tree must be; after every step the real tree equals it byte for byte (content hashes,
 * modes, symlink targets). Needs root and btrfs-progs; how long it takes: docs/testing.md.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createHash } from 'node:crypto';
import { posix } from 'node:path';
import fc from 'fast-check';
import { create } from '@bufbuild/protobuf';
import { createClient, type Client } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { Mode, ToolExecJobSchema, WorkspaceStorageService } from '@bedrock/contracts';
import { serviceTokenInterceptor } from '@bedrock/platform/server';
import type { ToolRunner } from '../src/create-tool-runner.ts';
import { btrfsRoot, hasBtrfs, isRoot, newWorkspaceId, treeOf } from './support-btrfs.ts';
import type { BtrfsRoot } from './support-btrfs.ts';
import { grpcClient, startTestRunner, TEST_SERVICES } from './support-runner.ts';

const UID = 200_013;
/**
 * Cases (BEDROCK_PROPERTY_RUNS, default 20; the issue asks for 200). Each case is ~10 tool runs and
 * real btrfs work: docs/testing.md has the time a run takes.
 */
const RUNS = Number(process.env.BEDROCK_PROPERTY_RUNS ?? 20);
const describeBtrfs = isRoot && hasBtrfs ? describe : describe.skip;
if (!isRoot || !hasBtrfs) console.warn('checkpoints-model.test.ts: skipped: needs root and btrfs-progs');

/** The model: path → the line treeOf gives for it (without the path). */
type Model = Map<string, string>;

const NAMES = ['a', 'b', 'd/c', 'd/e'] as const;
const MODES = [0o600, 0o644, 0o640, 0o755, 0o700] as const;
const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

type Op =
  | { op: 'write'; path: string; text: string }
  | { op: 'append'; path: string; text: string }
  | { op: 'delete'; path: string }
  | { op: 'rename'; from: string; to: string }
  | { op: 'chmod'; path: string; mode: number }
  | { op: 'symlink'; path: string; target: string }
  | { op: 'large'; path: string; mib: number; seed: string }
  | { op: 'git' }
  | { op: 'checkpoint' }
  | { op: 'rewind'; pick: number }
  | { op: 'fork'; pick: number };

const name = fc.constantFrom(...NAMES);
const text = fc.stringMatching(/^[a-z ]{0,12}$/);
/**
 * One step. The patch tool writes and appends; the bash tool deletes, renames, chmods, makes
 * symlinks, a large file and a nested git repository (all run by ExecuteTool, Unrestricted, as the
 * workspace's owner in the workspace's view). Checkpoints, rewinds and forks (a workspace made from
 * a checkpoint) go through WorkspaceStorageService, as the conversation service calls them.
 */
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ op: fc.constant('write' as const), path: name, text }),
  fc.record({ op: fc.constant('append' as const), path: name, text }),
  fc.record({ op: fc.constant('delete' as const), path: name }),
  fc.record({ op: fc.constant('rename' as const), from: name, to: name }),
  fc.record({ op: fc.constant('chmod' as const), path: name, mode: fc.constantFrom(...MODES) }),
  fc.record({ op: fc.constant('symlink' as const), path: name, target: fc.constantFrom('a', '../outside', 'd/c', '/etc/passwd') }),
  fc.record({
    op: fc.constant('large' as const),
    path: name,
    mib: fc.integer({ min: 1, max: 3 }),
    seed: fc.stringMatching(/^[a-z]{1,4}$/),
  }),
  fc.constant({ op: 'git' as const }),
  fc.constant({ op: 'checkpoint' as const }),
  fc.constant({ op: 'checkpoint' as const }),
  fc.record({ op: fc.constant('rewind' as const), pick: fc.nat() }),
  fc.record({ op: fc.constant('fork' as const), pick: fc.nat() }),
);

const isFileOrLink = (m: Model, p: string) => /^(file|link) /.test(m.get(p) ?? '');
const fileLine = (mode: number, content: Buffer) => `file ${mode.toString(8)} ${content.length} ${sha(content)}`;
const sorted = (m: Model) => [...m.entries()].map(([p, line]) => (line.startsWith('dir ') ? `${p}/ ${line}` : `${p} ${line}`)).sort();
const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

describeBtrfs('checkpoints against a model', () => {
  let fs: BtrfsRoot;
  let runner: ToolRunner;
  let storage: Client<typeof WorkspaceStorageService>;
  let calls = 0;
  beforeAll(async () => {
    fs = await btrfsRoot('bedrock-ckpt-model-', 2048);
    // A real runner serving that root: its tools run in the workspaces, its storage API keeps them.
    runner = await startTestRunner({ workspaces: { root: fs.root, image: fs.image, imageSize: fs.config.imageSize } });
    storage = createClient(
      WorkspaceStorageService,
      createGrpcTransport({ baseUrl: runner.grpcUrl, interceptors: [serviceTokenInterceptor(TEST_SERVICES.tokens.conversation!)] }),
    );
  }, 120_000);
  afterAll(async () => {
    await runner?.stop();
    fs?.destroy();
  });

  /** Runs a tool of the runner in workspace `path` as its owner (Unrestricted); fails the case unless the tool succeeds. */
  async function tool(path: string, toolName: 'bash' | 'patch', input: object): Promise<void> {
    const job = create(ToolExecJobSchema, {
      toolUseId: `model-${++calls}`,
      conversationId: 'conv-model',
      toolName,
      inputJson: JSON.stringify(input),
      cwd: path,
      mode: Mode.UNRESTRICTED,
      toolUid: UID,
      toolGid: UID,
      workspacePath: path,
    });
    for await (const msg of grpcClient(runner).executeTool({ job }))
      if (msg.kind.case === 'result') {
        expect({ toolName, input, isError: msg.kind.value.isError, content: msg.kind.value.isError ? msg.kind.value.content : '' }).toEqual(
          {
            toolName,
            input,
            isError: false,
            content: '',
          },
        );
        return;
      }
    throw new Error(`${toolName}: no result`);
  }
  const prepare = async (workspaceId: string, source?: { fromId: string; checkpointId: string }): Promise<string> =>
    (
      await storage.prepareWorkspace({
        workspaceId,
        uid: UID,
        gid: UID,
        quotaBytes: 0n,
        ...(source
          ? { source: { case: 'copyFromCheckpoint', value: { workspaceId: source.fromId, checkpointId: source.checkpointId } } }
          : {}),
      })
    ).path;

  // fast-check shrinks a failing sequence.
  it(`keeps the tree equal to the model through ${RUNS} random runs of changes, rewinds and forks`, async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 4, maxLength: 14 }), async (ops) => {
        const id = newWorkspaceId();
        const path = await prepare(id);
        const sh = (script: string) => tool(path, 'bash', { command: `umask 022; ${script}` });
        await sh('mkdir d');
        let model: Model = new Map([['d', 'dir 755']]);
        const saved: { id: string; model: Model }[] = [];
        // The contents the model knows, to recompute lines on append and chmod.
        let contents = new Map<string, Buffer>();
        const savedContents: Map<string, Buffer>[] = [];
        try {
          for (const step of ops) {
            switch (step.op) {
              case 'write':
              case 'append': {
                if (model.get(step.path)?.startsWith('link ')) {
                  await sh(`rm -f ${q(step.path)}`);
                  model.delete(step.path);
                }
                const before = step.op === 'append' ? (contents.get(step.path) ?? Buffer.alloc(0)) : Buffer.alloc(0);
                // The patch tool: overwrite makes or replaces the file, append_eof adds to an existing one.
                // A large file (NUL bytes: not text to patch, and patch refuses to replace it) gets its line from bash.
                if (before.includes(0)) await sh(`printf '%s\\n' ${q(step.text)} >> ${q(step.path)}`);
                else if (contents.get(step.path)?.includes(0)) await sh(`printf '%s\\n' ${q(step.text)} > ${q(step.path)}`);
                else {
                  const operation = step.op === 'append' && contents.has(step.path) ? 'append_eof' : 'overwrite';
                  const newText = operation === 'append_eof' ? `${step.text}\n` : `${before.toString()}${step.text}\n`;
                  await tool(path, 'patch', { path: step.path, patches: [{ operation, new_text: newText }] });
                }
                const content = Buffer.concat([before, Buffer.from(`${step.text}\n`)]);
                const mode = model.get(step.path)?.startsWith('file ') ? parseInt(model.get(step.path)!.split(' ')[1]!, 8) : 0o644;
                contents.set(step.path, content);
                model.set(step.path, fileLine(mode, content));
                break;
              }
              case 'delete':
                if (!isFileOrLink(model, step.path)) break;
                await sh(`rm -f ${q(step.path)}`);
                model.delete(step.path);
                contents.delete(step.path);
                break;
              case 'rename': {
                if (step.from === step.to || !isFileOrLink(model, step.from)) break;
                if (model.has(step.to) && !isFileOrLink(model, step.to)) break;
                // mv refuses to move a symlink onto the file it points to ("are the same file").
                const link = model.get(step.from)?.startsWith('link ') ? model.get(step.from)!.slice('link '.length) : undefined;
                if (link !== undefined && posix.join(posix.dirname(step.from), link) === step.to) break;
                await sh(`mv -T -f ${q(step.from)} ${q(step.to)}`);
                model.set(step.to, model.get(step.from)!);
                model.delete(step.from);
                if (contents.has(step.from)) contents.set(step.to, contents.get(step.from)!);
                else contents.delete(step.to);
                contents.delete(step.from);
                break;
              }
              case 'chmod':
                if (!model.get(step.path)?.startsWith('file ')) break;
                await sh(`chmod ${step.mode.toString(8)} ${q(step.path)}`);
                model.set(step.path, fileLine(step.mode, contents.get(step.path)!));
                break;
              case 'symlink':
                if (model.has(step.path) && !isFileOrLink(model, step.path)) break;
                await sh(`rm -f ${q(step.path)} && ln -s ${q(step.target)} ${q(step.path)}`);
                model.set(step.path, `link ${step.target}`);
                contents.delete(step.path);
                break;
              case 'large': {
                if (model.get(step.path)?.startsWith('link ')) {
                  await sh(`rm -f ${q(step.path)}`);
                  model.delete(step.path);
                }
                await sh(`{ printf '%s' ${q(step.seed)}; head -c ${step.mib * 1024 * 1024} /dev/zero; } > ${q(step.path)}`);
                const content = Buffer.concat([Buffer.from(step.seed), Buffer.alloc(step.mib * 1024 * 1024)]);
                const mode = model.get(step.path)?.startsWith('file ') ? parseInt(model.get(step.path)!.split(' ')[1]!, 8) : 0o644;
                contents.set(step.path, content);
                model.set(step.path, fileLine(mode, content));
                break;
              }
              case 'git': {
                if (model.has('g')) break;
                await sh('git init -q g && git -C g -c user.name=t -c user.email=t@e commit -q --allow-empty -m one');
                // A nested git repository's files cannot be predicted: the model takes them as git
                // wrote them, and from then on they must survive checkpoints, rewinds and forks
                // exactly like the rest.
                for (const line of treeOf(path)) {
                  const [p, ...rest] = line.split(' ');
                  const key = p!.replace(/\/$/, '');
                  if (key === 'g' || key.startsWith('g/')) model.set(key, rest.join(' '));
                }
                break;
              }
              case 'checkpoint': {
                const ckpt = `k${saved.length}`;
                await storage.createCheckpoint({ workspaceId: id, checkpointId: ckpt });
                saved.push({ id: ckpt, model: new Map(model) });
                savedContents.push(new Map(contents));
                break;
              }
              case 'rewind': {
                if (saved.length === 0) break;
                const k = step.pick % saved.length;
                await storage.restoreCheckpoint({ workspaceId: id, checkpointId: saved[k]!.id });
                model = new Map(saved[k]!.model);
                contents = new Map(savedContents[k]!);
                break;
              }
              case 'fork': {
                if (saved.length === 0) break;
                const k = step.pick % saved.length;
                const forkId = newWorkspaceId();
                const forkPath = await prepare(forkId, { fromId: id, checkpointId: saved[k]!.id });
                expect(treeOf(forkPath).sort()).toEqual(sorted(saved[k]!.model));
                // The two lines never touch each other's files.
                await tool(forkPath, 'bash', { command: 'printf fork > only-in-fork' });
                expect(treeOf(path).sort()).toEqual(sorted(model));
                await sh('printf source > only-in-source');
                const forkTree = treeOf(forkPath);
                expect(forkTree.filter((l) => !l.startsWith('only-in-fork ')).sort()).toEqual(sorted(saved[k]!.model));
                expect(forkTree.some((l) => l.startsWith('only-in-fork file '))).toBe(true);
                await sh('rm only-in-source');
                await storage.removeWorkspace({ workspaceId: forkId });
                break;
              }
            }
            expect(treeOf(path).sort()).toEqual(sorted(model));
          }
        } finally {
          await storage.removeWorkspace({ workspaceId: id });
        }
      }),
      { numRuns: RUNS },
    );
  }, 1_800_000);
});
