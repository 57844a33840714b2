/**
 * One WatchConversationResponse per event for every watcher of a process, so an event is encoded
 * once however many watchers send it (docs/web-bff.md, "Watch streams": encoding once). Binary
 * codecs get {@link preEncodedResponse}, JSON ones {@link plainResponse}; binary gRPC watches over
 * HTTP/2 skip connect and write {@link SharedEvent.grpcFrame} (./grpc-watch.ts).
 */
import { create, toBinary } from '@bufbuild/protobuf';
import { BinaryWriter, WireType } from '@bufbuild/protobuf/wire';
import {
  ConversationEventSchema,
  WatchConversationResponseSchema,
  type ConversationEvent,
  type WatchConversationResponse,
} from '@bedrock/contracts';

const EVENT_FIELD = WatchConversationResponseSchema.field.event!.number;

/**
 * A response whose binary encoding is `event`'s, computed once. Only for binary codecs (gRPC,
 * gRPC-Web, Connect with protobuf). connect-node serialises each message a handler yields, per
 * stream, with `toBinary`, and offers no way to hand it bytes; so the response carries the event
 * already encoded, as the unknown field 1 (`event`): `toBinary` then writes tag + the stored
 * bytes, the same wire bytes as encoding the event, for the cost of a copy.
 */
export function preEncodedResponse(event: ConversationEvent): WatchConversationResponse {
  const data = new BinaryWriter().bytes(toBinary(ConversationEventSchema, event)).finish();
  const response = create(WatchConversationResponseSchema);
  response.$unknown = [{ no: EVENT_FIELD, wireType: WireType.LengthDelimited, data }];
  return response;
}

/** For the JSON codecs, which drop unknown fields: an ordinary response (shared too, encoded per stream by connect). */
export function plainResponse(event: ConversationEvent): WatchConversationResponse {
  return create(WatchConversationResponseSchema, { event });
}

/** Whether a request's content type is a JSON codec (Connect or gRPC-Web with JSON). */
export function isJsonCodec(contentType: string | null): boolean {
  return contentType !== null && contentType.includes('json');
}

/** An event with its shared responses (connect, binary and JSON) and gRPC frame, each made on first use. */
export class SharedEvent {
  private binaryResponse: WatchConversationResponse | undefined;
  private jsonResponse: WatchConversationResponse | undefined;
  private frame: Uint8Array | undefined;

  constructor(readonly event: ConversationEvent) {}

  response(json: boolean): WatchConversationResponse {
    if (json) return (this.jsonResponse ??= plainResponse(this.event));
    return (this.binaryResponse ??= preEncodedResponse(this.event));
  }

  /** The whole gRPC message frame (5-byte envelope + response bytes), for ./grpc-watch.ts. */
  grpcFrame(): Uint8Array {
    if (this.frame) return this.frame;
    const bytes = toBinary(WatchConversationResponseSchema, this.response(false));
    const frame = Buffer.allocUnsafe(5 + bytes.length);
    frame[0] = 0;
    frame.writeUInt32BE(bytes.length, 1);
    frame.set(bytes, 5);
    return (this.frame = frame);
  }
}
