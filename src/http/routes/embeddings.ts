/**
 * The Embeddings API (LMSP section 14): `POST /v1/embeddings`, answered directly. The route
 * parses, authorizes and calls the use case (src/tasks/embeddings.ts); a client that leaves
 * (or is revoked) stops the computation.
 */
import type { FastifyInstance } from 'fastify';
import type { CreateEmbeddingBody } from '../../api/embeddings.js';
import { MAX_EMBEDDING_INPUTS } from '../../engine/engine.js';
import { createEmbeddings } from '../../tasks/embeddings.js';
import { clientKeyOf, clientOf } from '../auth.js';
import type { AppContext } from '../context.js';

/** The shape only; each input is checked by the use case, so a refusal names it exactly. */
export const createEmbeddingBody = {
  type: 'object',
  required: ['model', 'input'],
  properties: {
    model: { type: 'string', minLength: 1, description: 'A registered model id.' },
    input: {
      description: `A string, an array of strings, an array of token ids, or an array of arrays of token ids; 1 to ${MAX_EMBEDDING_INPUTS} inputs, none empty or longer than the model's context.`,
      // One type list, so a wrong type (null, a number) is told both that are allowed.
      type: ['string', 'array'],
    },
    encoding_format: { type: ['string', 'null'], enum: ['float', 'base64', null], description: 'float (default), or base64: little-endian float32 bytes.' },
    dimensions: { type: ['integer', 'null'], minimum: 1, description: "Truncate to this many dimensions and renormalise; at most the model's own." },
    user: { type: ['string', 'null'], description: 'Accepted, not used.' },
  },
} as const;

export function registerEmbeddingRoutes(app: FastifyInstance, context: AppContext): void {
  app.post('/v1/embeddings', { config: { access: 'responses' }, schema: { body: createEmbeddingBody } }, async (request, reply) => {
    const client = clientOf(request);
    const key = clientKeyOf(request, context);
    const abort = new AbortController();
    const onClose = () => {
      if (!reply.raw.writableFinished) abort.abort();
    };
    reply.raw.on('close', onClose);
    // Revoking the client ends the request as a disconnect does (LMSP 4).
    const unbind = context.connections.bind(client.id, () => {
      abort.abort();
      reply.raw.destroy();
    }, { finishOnStop: true });
    try {
      const { list, replayed } = await createEmbeddings(context.core, request.body as CreateEmbeddingBody, key, abort.signal);
      if (replayed) reply.header('idempotent-replayed', 'true');
      return list;
    } catch (error) {
      // The client left (or was revoked): nobody reads an answer, and its stop is no failure to log.
      if (abort.signal.aborted || reply.raw.destroyed) return;
      throw error;
    } finally {
      reply.raw.off('close', onClose);
      unbind();
    }
  });
}
