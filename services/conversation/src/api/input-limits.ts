/** Input limits of the API; a request over any of them is INVALID_ARGUMENT naming the limit. */
export const LIMITS = {
  /** Characters of one message's text. */
  maxTextChars: 200_000,
  /** Images attached to one message. */
  maxImages: 20,
  /** Bytes of one attached image (the gateway resizes to the provider's limits). */
  maxImageBytes: 20 * 1024 * 1024,
  /** Pixels of one attached image (width × height), so a small file cannot expand into an hour of decoding. */
  maxImagePixels: 100_000_000,
  /** Bytes of one request on the wire (all images together). */
  maxRequestBytes: 64 * 1024 * 1024,
  /** Characters of a working directory path. */
  maxCwdChars: 4096,
  imageMediaTypes: ['image/png', 'image/jpeg', 'image/gif', 'image/webp'] as readonly string[],
  defaultPageSize: 50,
  maxPageSize: 200,
  /** Sub-agents in GetConversation and a watch's snapshot (ListConversations with parent_id pages through all). */
  subAgentsShown: 100,
} as const;
