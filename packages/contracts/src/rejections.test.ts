import { describe, expect, it } from '@jest/globals';
import { Code, ConnectError } from '@connectrpc/connect';
import { setTrailerStatus, findTrailerError } from '@connectrpc/connect/protocol-grpc';
import { rejectionError, rejectionOf } from './rejections.ts';

describe('rejections', () => {
  it('travel as a typed error detail and survive the gRPC trailer encoding', () => {
    const err = rejectionError({ code: 'agent_busy', message: 'The agent is busy.' });
    expect([err.code, err.rawMessage]).toEqual([Code.FailedPrecondition, 'The agent is busy.']);
    const received = findTrailerError(setTrailerStatus(new Headers(), err));
    expect(rejectionOf(received)).toMatchObject({ code: 'agent_busy', message: 'The agent is busy.' });
    expect(received?.metadata.has('bedrock-rejection')).toBe(false);
  });

  it('are absent from other errors', () => {
    expect(rejectionOf(new ConnectError('boom', Code.Internal))).toBeUndefined();
    expect(rejectionOf(new Error('plain'))).toBeUndefined();
    expect(rejectionError({ code: 'empty_message', message: 'empty' }, Code.InvalidArgument).code).toBe(Code.InvalidArgument);
  });
});
