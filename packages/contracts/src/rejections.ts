/**
 * Refusals of user actions as typed error details: the conversation service attaches a
 * `bedrock.v1.Rejection` to the Connect/gRPC error, web-bff passes it on, and clients read it
 * with {@link rejectionOf} (the Connect protocol carries it in the error body, gRPC and
 * gRPC-web in the `grpc-status-details-bin` trailer).
 */
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import { RejectionSchema, type Rejection } from './gen/bedrock/v1/types_pb.ts';

/** An error that refuses a user action: `message` for the user, `code` for programs (e.g. "agent_busy"). */
export function rejectionError(
  rejection: { readonly code: string; readonly message: string },
  code: Code = Code.FailedPrecondition,
): ConnectError {
  return new ConnectError(rejection.message, code, undefined, [
    { desc: RejectionSchema, value: create(RejectionSchema, { code: rejection.code, message: rejection.message }) },
  ]);
}

/** The Rejection an error carries; undefined for any other error. */
export function rejectionOf(err: unknown): Rejection | undefined {
  return err instanceof ConnectError ? err.findDetails(RejectionSchema)[0] : undefined;
}
