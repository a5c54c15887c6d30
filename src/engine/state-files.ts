/**
 * The files of a task's saved generation state in the state directory (engine/generation.ts
 * writes them; the service removes those of tasks that will not resume): the state, its SHA-256
 * beside it, and the state being written.
 */
import { join } from 'node:path';

export function statePath(stateDir: string, taskId: string): string {
  return join(stateDir, `${taskId}.state`);
}

/** The SHA-256 of a saved state, beside it: llama.cpp checks a state's layout, never its values. */
export function digestPath(stateDir: string, taskId: string): string {
  return `${statePath(stateDir, taskId)}.sha256`;
}

export function temporaryStatePath(stateDir: string, taskId: string): string {
  return `${statePath(stateDir, taskId)}.tmp`;
}

/** The task a file of the state directory belongs to, or null for a file that is none of the three. */
export function taskOfStateFile(name: string): string | null {
  return /^(.+)\.state(\.tmp|\.sha256)?$/.exec(name)?.[1] ?? null;
}
