/**
 * The baseline of the durable-create benchmark: a bare Fastify route that parses the same JSON
 * and answers 202 without storing anything. Prints its URL as one JSON line.
 */
import Fastify from 'fastify';

const app = Fastify({ bodyLimit: 1024 * 1024 });
app.post('/v1/responses', async (request, reply) => {
  const body = request.body as { model?: string };
  return reply.code(202).send({ id: 'resp_bare', object: 'response', status: 'queued', model: body.model ?? null });
});
const url = await app.listen({ host: '127.0.0.1', port: 0 });
process.stdout.write(`${JSON.stringify({ url })}\n`);
