/**
 * A local server that speaks the Anthropic Messages API over real HTTP: `POST /v1/messages` as JSON or as
 * server-sent events (`stream: true`), with the API's headers (`request-id`, `retry-after`) and error bodies.
 * Tests script it per request; the offline demo model is just its default responder. Clients use the real
 * SDK against it — nothing is mocked. Every request is checked first by the strict validator
 * (validate-request.ts); docs/testing.md, "The model: the local Messages API server".
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import {
  encodeSse,
  estimateTokens,
  makeId,
  messageBody,
  resolveMessage,
  streamEvents,
  withCumulativeDeltaUsage,
  type SseEvent,
} from './sse-encoder.ts';
import type {
  ApiContentBlock,
  ImageRefusalRule,
  MessagesRequestBody,
  ReceivedRequest,
  Responder,
  ScriptedError,
  ScriptedMessage,
  ScriptedResponse,
} from './script.ts';
import { createBlockSigner } from './signing.ts';
import { validateRequest } from './validate-request.ts';
import { PromptCache, prefixUnits } from './prompt-cache.ts';
import { betasOf, compactEditOf, fakeSummary, issueCompaction } from './compaction.ts';
import type { InputUsage } from './sse-encoder.ts';

export interface MessagesApiServerOptions {
  /** Default 127.0.0.1. */
  readonly host?: string;
  /** Default 0: any free port. */
  readonly port?: number;
  /** Answers requests when nothing is scripted. Default: a 500 api_error saying so. */
  readonly fallback?: Responder;
  /**
   * Keys accepted as `x-api-key` or `Authorization: Bearer`. Default: any non-empty key
   * (a request with no key at all still gets the API's 401).
   */
  readonly apiKeys?: readonly string[];
  /** Requests kept in `requests` (oldest dropped first). Default 1000. */
  readonly keepRequests?: number;
  /** Called right after each SSE event is written, with `performance.now()` (for latency benchmarks). */
  readonly onEventWritten?: (requestId: string, event: SseEvent, at: number) => void;
  /** Images refused with a 400 as the API does (see {@link ImageRefusalRule}); more with `refuseImages()`. */
  readonly refuseImages?: readonly ImageRefusalRule[];
  /**
   * The key of its thinking signatures and redacted thinking data. Default: random, so only
   * this server's blocks verify. The offline demo model's servers use `OFFLINE_SIGNING_KEY`,
   * so their blocks stay valid across gateway restarts and replicas.
   */
  readonly signingKey?: string | Uint8Array;
  /** The clock of the prompt cache's TTLs (ms). Default Date.now. */
  readonly now?: () => number;
}

/** A request the validator refused (answered with HTTP 400 invalid_request_error). */
export interface RequestViolation {
  readonly requestId: string;
  /** The error message sent, as the API words it. */
  readonly message: string;
}

export interface MessagesApiServer {
  /** The base URL for the SDK's `baseURL`, e.g. `http://127.0.0.1:41234`. */
  readonly url: string;
  readonly port: number;
  /** Queues responses; each request takes the first one. */
  enqueue(...responses: ScriptedResponse[]): void;
  /** Replaces the fallback responder. */
  setFallback(responder: Responder): void;
  /** From now on, refuses the images these rules match (HTTP 400, as the API does), before any scripted response. */
  refuseImages(...rules: ImageRefusalRule[]): void;
  /** Forgets every image refusal rule. */
  clearImageRefusals(): void;
  /** Requests received so far, oldest first. */
  readonly requests: ReceivedRequest[];
  /** Requests whose connection the client closed before the response ended (e.g. aborts); `at` is Date.now(), `hr` performance.now(). */
  readonly clientAborts: ReadonlyArray<{ readonly requestId: string; readonly at: number; readonly hr: number }>;
  /**
   * Requests refused by the validator (the real API would refuse them too), oldest first; at most `keepRequests` kept.
   * Each was answered with HTTP 400 `invalid_request_error` before any scripted response, so a test can assert its
   * product sent none.
   */
  readonly violations: RequestViolation[];
  /**
   * The signature this server issues for a thinking block with exactly this text (for histories built by a test).
   * Thinking blocks it streams carry its own signatures, which the validator checks when they come back.
   */
  signThinking(thinking: string): string;
  /** A redacted_thinking data string this server accepts (for histories built by a test). */
  redactedThinkingData(): string;
  /** Scripted responses not yet used. */
  pending(): number;
  /** The server's prompt cache (prompt-cache.ts): every valid request reads and writes it. */
  readonly promptCache: PromptCache;
  close(): Promise<void>;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const notScripted: Responder = () => ({
  kind: 'error',
  status: 500,
  errorType: 'api_error',
  message: 'local Messages API server: no scripted response and no fallback responder',
});

export async function startMessagesApiServer(options: MessagesApiServerOptions = {}): Promise<MessagesApiServer> {
  const queue: ScriptedResponse[] = [];
  const requests: ReceivedRequest[] = [];
  const clientAborts: Array<{ requestId: string; at: number; hr: number }> = [];
  const violations: RequestViolation[] = [];
  const signer = createBlockSigner(options.signingKey);
  const keep = options.keepRequests ?? 1000;
  let fallback = options.fallback ?? notScripted;
  const imageRules: ImageRefusalRule[] = [...(options.refuseImages ?? [])];
  const sockets = new Set<Socket>();
  const promptCache = new PromptCache(options.now);

  const server = createServer((req, res) => {
    void handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) sendError(res, makeId('req'), { kind: 'error', status: 500, errorType: 'api_error', message: String(err) });
      else res.destroy();
    });
  });
  server.on('connection', (socket) => {
    // SSE is many small writes; without this, Nagle holds each behind the client's delayed ACK.
    socket.setNoDelay(true);
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const requestId = makeId('req');
    const raw = await readBody(req);
    let body: MessagesRequestBody | null = null;
    try {
      body = JSON.parse(raw) as MessagesRequestBody;
    } catch {
      body = null;
    }
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const received: ReceivedRequest = { method: req.method ?? 'GET', path, headers: req.headers, body, requestId, receivedAt: Date.now() };
    requests.push(received);
    if (requests.length > keep) requests.shift();
    let finished = false;
    res.on('close', () => {
      if (!finished) clientAborts.push({ requestId, at: Date.now(), hr: performance.now() });
    });
    res.on('finish', () => {
      finished = true;
    });

    if (req.method !== 'POST' || path !== '/v1/messages') {
      return sendError(res, requestId, {
        kind: 'error',
        status: 404,
        errorType: 'not_found_error',
        message: `Not found: ${req.method} ${path}`,
      });
    }
    const key = apiKeyOf(req);
    if (!key) {
      return sendError(res, requestId, {
        kind: 'error',
        status: 401,
        errorType: 'authentication_error',
        message: 'x-api-key header is required',
      });
    }
    if (options.apiKeys && !options.apiKeys.includes(key)) {
      return sendError(res, requestId, { kind: 'error', status: 401, errorType: 'authentication_error', message: 'invalid x-api-key' });
    }
    const betas = betasOf(req.headers);
    const invalid = body === null ? 'There was an error parsing the body: it is not valid JSON.' : validateRequest(body, signer, betas);
    if (invalid !== undefined || !body) {
      const message = invalid ?? 'There was an error parsing the body.';
      violations.push({ requestId, message });
      if (violations.length > keep) violations.shift();
      return sendError(res, requestId, { kind: 'error', status: 400, errorType: 'invalid_request_error', message });
    }
    const refused = refusedImage(body, imageRules);
    if (refused) return sendError(res, requestId, { kind: 'error', status: 400, errorType: 'invalid_request_error', message: refused });

    const scripted = queue.shift() ?? (await fallback(received));
    switch (scripted.kind) {
      case 'drop':
        if (scripted.delayMs) await sleep(scripted.delayMs);
        req.socket.destroy();
        return;
      case 'hang':
        return; // the client's abort or timeout closes the connection
      case 'error':
        if (scripted.delayMs) await sleep(scripted.delayMs);
        return sendError(res, requestId, scripted);
      case 'message': {
        if (scripted.delayMs) await sleep(scripted.delayMs);
        const answer = compactIfTriggered(scripted, body);
        if (body.stream === true) return sendStream(res, requestId, answer.scripted, body, answer);
        return sendJson(res, requestId, answer.scripted, body, answer);
      }
    }
  }

  interface Answer {
    readonly scripted: ScriptedMessage;
    readonly input: InputUsage;
    /** The compaction iteration's usage, when the request was compacted. */
    readonly compaction?: InputUsage & { output_tokens: number };
  }

  /**
   * The prompt cache's counts for the request; with a compact edit whose trigger the input
   * crosses, a compaction block first (alone, with stop reason `compaction`, when asked to
   * pause) and the answer's input counted on the compacted context (tools, system, the block).
   */
  function compactIfTriggered(scripted: ScriptedMessage, body: MessagesRequestBody): Answer {
    const edit = compactEditOf(body);
    const total = prefixUnits(body).reduce((n, u) => n + u.tokens, 0);
    if (!edit || total <= edit.trigger) return { scripted, input: promptCache.apply(body) };
    const issued = issueCompaction(fakeSummary(body, edit.instructions), signer);
    const compaction = { ...promptCache.apply(body), output_tokens: estimateTokens(issued.content) };
    const block = { type: 'compaction' as const, ...issued };
    const compacted: MessagesRequestBody = { ...body, messages: [{ role: 'assistant', content: [block] }] };
    const input = promptCache.apply(compacted);
    const content = edit.pauseAfterCompaction ? [block] : [block, ...scripted.content];
    return {
      scripted: { ...scripted, content, ...(edit.pauseAfterCompaction ? { stopReason: 'compaction' } : {}) },
      input,
      compaction,
    };
  }

  function withIterations(message: ReturnType<typeof resolveMessage>, answer: Answer): ReturnType<typeof resolveMessage> {
    if (!answer.compaction) return message;
    const { cache_creation: c1, ...compaction } = answer.compaction;
    const { output_tokens, input_tokens, cache_creation_input_tokens, cache_read_input_tokens } = message.usage;
    const iterations = [
      { type: 'compaction', ...compaction, cache_creation: c1 ?? null },
      { type: 'message', input_tokens, output_tokens, cache_creation_input_tokens, cache_read_input_tokens },
    ];
    return { ...message, usage: { ...message.usage, iterations } };
  }

  function sendJson(res: ServerResponse, requestId: string, scripted: ScriptedMessage, body: MessagesRequestBody, answer: Answer): void {
    const message = withIterations(resolveMessage(scripted, body.model, answer.input, signer), answer);
    const text = JSON.stringify(messageBody(message));
    res.writeHead(200, { 'content-type': 'application/json', 'request-id': requestId, 'content-length': Buffer.byteLength(text) });
    res.end(text);
  }

  async function sendStream(
    res: ServerResponse,
    requestId: string,
    scripted: ScriptedMessage,
    body: MessagesRequestBody,
    answer: Answer,
  ): Promise<void> {
    const message = withIterations(resolveMessage(scripted, body.model, answer.input, signer), answer);
    let events: SseEvent[] = streamEvents(message, scripted.chunkChars ?? 12);
    if (scripted.usageInDelta) events = withCumulativeDeltaUsage(events, message.usage);
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'request-id': requestId,
    });
    res.flushHeaders();
    const fault = scripted.fault;
    for (let i = 0; i <= events.length; i++) {
      if (fault && fault.afterEvents === i) {
        switch (fault.type) {
          case 'cut':
            res.socket?.destroy();
            return;
          case 'end':
            res.end();
            return;
          case 'stall':
            return; // left open; closed by the client or by close()
          case 'error-event':
            res.end(encodeSse({ event: 'error', data: { type: 'error', error: { type: fault.errorType, message: fault.message } } }));
            return;
          case 'malformed':
            res.write('event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_de\n\n');
            break;
          case 'pings':
            for (const end = Date.now() + fault.forMs; Date.now() < end && !res.destroyed;) {
              await sleep(fault.everyMs);
              res.write(encodeSse({ event: 'ping', data: { type: 'ping' } }));
            }
            break;
        }
      }
      const event = events[i];
      if (!event) break;
      if (res.destroyed) return;
      if (scripted.eventDelayMs && i > 0) await sleep(scripted.eventDelayMs);
      res.write(encodeSse(event));
      options.onEventWritten?.(requestId, event, performance.now());
    }
    res.end();
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve());
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;

  return {
    url: `http://${host}:${address.port}`,
    port: address.port,
    requests,
    clientAborts,
    violations,
    signThinking: (thinking) => signer.signThinking(thinking),
    redactedThinkingData: () => signer.redactedData(),
    enqueue: (...responses) => void queue.push(...responses),
    setFallback: (responder) => {
      fallback = responder;
    },
    refuseImages: (...rules) => void imageRules.push(...rules),
    clearImageRefusals: () => void imageRules.splice(0),
    pending: () => queue.length,
    promptCache,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

function apiKeyOf(req: IncomingMessage): string | undefined {
  const header = req.headers['x-api-key'];
  if (typeof header === 'string' && header) return header;
  const auth = req.headers.authorization;
  const match = typeof auth === 'string' ? /^Bearer\s+(.+)$/i.exec(auth) : null;
  return match?.[1];
}

/** The API's message for the first image of the request a rule refuses, or undefined. */
function refusedImage(body: MessagesRequestBody, rules: readonly ImageRefusalRule[]): string | undefined {
  if (rules.length === 0) return undefined;
  const check = (block: ApiContentBlock | { type: string; source?: ApiContentBlock['source'] }, path: string): string | undefined => {
    if (block.type !== 'image' || block.source?.type !== 'base64') return undefined;
    const image = { mediaType: block.source.media_type ?? '', data: block.source.data ?? '' };
    const rule = rules.find((r) => r.match(image));
    if (!rule) return undefined;
    const reason = rule.reason ?? 'Could not process image';
    return rule.named === false ? reason : `${path}.image.source.base64: ${reason}`;
  };
  for (const [i, m] of body.messages.entries()) {
    if (typeof m.content === 'string') continue;
    for (const [j, block] of m.content.entries()) {
      const top = check(block, `messages.${i}.content.${j}`);
      if (top) return top;
      if (block.type === 'tool_result' && Array.isArray(block.content)) {
        for (const [k, inner] of block.content.entries()) {
          const nested = check(inner as ApiContentBlock, `messages.${i}.content.${j}.content.${k}`);
          if (nested) return nested;
        }
      }
    }
  }
  return undefined;
}

function sendError(res: ServerResponse, requestId: string, e: ScriptedError): void {
  const text = JSON.stringify({ type: 'error', error: { type: e.errorType, message: e.message }, request_id: requestId });
  const headers: Record<string, string | number> = {
    'content-type': 'application/json',
    'request-id': requestId,
    'content-length': Buffer.byteLength(text),
    ...e.headers,
  };
  if (e.retryAfter !== undefined) headers['retry-after'] = e.retryAfter;
  res.writeHead(e.status, headers);
  res.end(text);
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    req.on('error', reject);
  });
}
