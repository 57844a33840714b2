/**
 * The provider's `metadata.user_id` for a conversation's requests: a stable opaque id of its
 * owner, HMAC-SHA256 of the owner's user id under a deployment secret (hex). The same user gets
 * the same id on every request and conversation, so the provider can tell users apart (abuse
 * detection) without learning who they are: never a name or an email, and without the secret
 * the id cannot be tied back to a user id (docs/conversation.md, "Owner reference").
 */
import { createHmac } from 'node:crypto';

export function ownerRefOf(ownerId: string, secret: string | undefined): string {
  if (!secret || !ownerId) return '';
  return createHmac('sha256', secret).update(`bedrock-owner-ref:v1:${ownerId}`).digest('hex');
}
