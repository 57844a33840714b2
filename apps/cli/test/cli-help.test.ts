/**
 * `bedrock` on a command line it cannot run: --version, `help [COMMAND]`, `COMMAND --help`, and
 * one line (no parser text, no whole usage) for an unknown command or option, with the nearest
 * known one. None of these needs a server.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import { run, USAGE } from '../src/run.ts';
import { didYouMean } from '../src/help.ts';

async function bedrock(args: string[]) {
  let stdout = '';
  let stderr = '';
  const code = await run(
    args,
    { HOME: '/nonexistent', BEDROCK_URL: 'http://127.0.0.1:9' },
    {
      out: (t) => void (stdout += t),
      err: (t) => void (stderr += t),
    },
  );
  return { code, stdout, stderr };
}

const version = (JSON.parse(readFileSync('apps/cli/package.json', 'utf8')) as { version: string }).version;

describe('bedrock help and command-line mistakes', () => {
  it('--version prints the version', async () => {
    expect(await bedrock(['--version'])).toEqual({ code: 0, stdout: `bedrock ${version}\n`, stderr: '' });
  });

  it('help prints the usage; help CMD and CMD --help print that command alone', async () => {
    expect(await bedrock(['help'])).toEqual({ code: 0, stdout: USAGE, stderr: '' });
    const ls = await bedrock(['help', 'ls']);
    expect(ls.code).toBe(0);
    expect(ls.stdout).toMatch(/^usage: bedrock ls/);
    expect(ls.stdout).toContain('ls [--all] [--parent ID] [--archived] [--search TEXT]');
    expect(ls.stdout).not.toContain('send ID');
    expect(ls.stdout.split('\n').length).toBeLessThan(15);
    expect(await bedrock(['ls', '--help'])).toEqual(ls);
    const send = (await bedrock(['send', '--help'])).stdout;
    expect(send).toContain('send ID TEXT|-');
    expect(send).toContain('send ID --file PATH');
    expect(send).toContain('--queue sends it when the turn ends');
    expect((await bedrock(['approve', '--help'])).stdout).toContain('approve ID');
    const acp = await bedrock(['acp', '--help']);
    expect(acp.code).toBe(0);
    expect(acp.stdout).toMatch(/^usage: bedrock acp\n/);
    expect(acp.stdout).not.toContain('chat [ID]');
    expect((await bedrock(['chat', '--help'])).stdout).toContain('SETTINGS: --thinking');
  });

  it('an unknown command or option is one line naming the nearest, exit 2', async () => {
    expect(await bedrock(['lss'])).toEqual({
      code: 2,
      stdout: '',
      stderr: 'bedrock: unknown command "lss" (did you mean ls?); bedrock help lists the commands\n',
    });
    expect(await bedrock(['help', 'shwo'])).toEqual({
      code: 2,
      stdout: '',
      stderr: 'bedrock: unknown command "shwo" (did you mean show?); bedrock help lists the commands\n',
    });
    expect(await bedrock(['ls', '--bogus'])).toEqual({
      code: 2,
      stdout: '',
      stderr: 'bedrock: unknown option --bogus; bedrock help ls lists the options\n',
    });
    expect((await bedrock(['ls', '--al'])).stderr).toBe(
      'bedrock: unknown option --al (did you mean --all?); bedrock help ls lists the options\n',
    );
    expect((await bedrock(['send', 'x', 'y', '--wiat'])).stderr).toBe(
      'bedrock: unknown option --wiat (did you mean --wait?); bedrock help send lists the options\n',
    );
    expect((await bedrock(['show', 'x', '--cwd'])).stderr).toBe('bedrock: --cwd needs a value; bedrock help show lists the options\n');
    expect((await bedrock(['send', 'x', 'y', '--wait=yes'])).stderr).toBe(
      'bedrock: --wait takes no value; bedrock help send lists the options\n',
    );
    // A command's wrong arguments: one line pointing at its help, not the whole usage.
    const wrong = await bedrock(['show']);
    expect(wrong).toEqual({ code: 2, stdout: '', stderr: 'bedrock: expected a conversation id; bedrock help show shows its usage\n' });
  });

  it('did-you-mean suggests only near misses', () => {
    expect(didYouMean('stats', ['show', 'ls'])).toBeUndefined();
    expect(didYouMean('snd', ['send', 'show'])).toBe('send');
    // Two letters swapped is one slip: "send", not "new" (both two Levenshtein edits away).
    expect(didYouMean('sned', ['new', 'send'])).toBe('send');
    expect(didYouMean('--wiat', ['--wait', '--at'])).toBe('--wait');
    expect(didYouMean('ls', ['ls'])).toBeUndefined();
  });
});
