/**
 * The provider's `metadata.user_id` for a conversation's requests: a stable opaque id of its
 * owner, HMAC-SHA256 of the owner's user id under a deployment secret (hex). The same user gets
 * the same id on every request and conversation, so the provider can tell users apart (abuse
 * detection) without learning who they are: never a name or an email, and without the secret
 * the id cannot be tied back to a user id (docs/conversation.md, "Owner reference").
 */
import { createHmac } from 'node:crypto';

/** Owners whose reference is remembered (an HMAC per LLM request was 1% of the applier's CPU); all forgotten when full. */
const REMEMBERED = 10_000;
/** The references computed under `rememberedFor`, by owner. */
const remembered = new Map<string, string>();
let rememberedFor: string | undefined;

export function ownerRefOf(ownerId: string, secret: string | undefined): string {
  if (!secret || !ownerId) return '';
  if (secret !== rememberedFor) {
    remembered.clear();
    rememberedFor = secret;
  }
  let ref = remembered.get(ownerId);
  if (ref === undefined) {
    ref = createHmac('sha256', secret).update(`bedrock-owner-ref:v1:${ownerId}`).digest('hex');
    if (remembered.size >= REMEMBERED) remembered.clear();
    remembered.set(ownerId, ref);
  }
  return ref;
}
