/** Reads a server-sent event stream with a real SSE parser, frame by frame. */
import { EventSourceParserStream } from 'eventsource-parser/stream';

export interface SseFrame {
  id: string | undefined;
  event: string | undefined;
  data: string;
}

export async function* readSse(response: Response): AsyncGenerator<SseFrame> {
  if (!response.body) throw new Error('no body');
  const stream = response.body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream());
  for await (const message of stream) yield { id: message.id, event: message.event, data: message.data };
}

/** All frames until the server closes the stream. */
export async function collectSse(response: Response): Promise<SseFrame[]> {
  const frames: SseFrame[] = [];
  for await (const frame of readSse(response)) frames.push(frame);
  return frames;
}
