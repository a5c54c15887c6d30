/**
 * The error of a model load that llama.cpp refused. node-llama-cpp's own says only "Failed to load
 * model"; llama.cpp's error lines logged meanwhile say why (a key of the wrong type, a missing
 * tensor), and go into the task's error, not only the log (LMSP 9).
 *
 * A client without `models:write` may read that error and must never see a file-system path
 * (LMSP 5). The model's path is known here whole, spaces and commas included (which a search for
 * paths in free text stops at): it is masked first; the service masks any other path it finds.
 */
import { dirname } from 'node:path';

const MAX_LINES = 3;
const MAX_LINE_CHARS = 300;

export function loadFailure(error: unknown, llamaLines: readonly string[], modelPath: string): Error {
  const masked = (line: string) => line.split(modelPath).join('<file>').split(dirname(modelPath)).join('<dir>').trim();
  const reasons = [...new Set(llamaLines.map(masked))].filter((line) => line !== '').slice(-MAX_LINES)
    .map((line) => (line.length > MAX_LINE_CHARS ? `${line.slice(0, MAX_LINE_CHARS)}...` : line));
  const message = masked(error instanceof Error ? error.message : String(error));
  return new Error(reasons.length === 0 ? message : `${message} (llama.cpp: ${reasons.join('; ')})`);
}
