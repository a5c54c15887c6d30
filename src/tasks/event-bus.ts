/**
 * Tells live followers that a task changed, right after the commit that changed it. Followers
 * then read the new events from the log, so what they send is always what is on disk.
 */
import type { Task, TaskStatus } from '../domain/tasks.js';
import type { TaskNotifier } from '../store/index.js';

/** `previous`: the status the commit changed the task from; null for a task it created. */
type Listener = (task: Task, previous: TaskStatus | null) => void;

export class TaskEventBus implements TaskNotifier {
  private readonly byTask = new Map<string, Set<Listener>>();
  private readonly everyTask = new Set<Listener>();

  taskChanged(taskId: string, task: Task, previous: TaskStatus | null = null): void {
    for (const listener of this.byTask.get(taskId) ?? []) listener(task, previous);
    for (const listener of this.everyTask) listener(task, previous);
  }

  subscribe(taskId: string, listener: Listener): () => void {
    let listeners = this.byTask.get(taskId);
    if (!listeners) {
      listeners = new Set();
      this.byTask.set(taskId, listeners);
    }
    listeners.add(listener);
    return () => {
      listeners.delete(listener);
      if (listeners.size === 0) this.byTask.delete(taskId);
    };
  }

  onAnyTask(listener: Listener): () => void {
    this.everyTask.add(listener);
    return () => this.everyTask.delete(listener);
  }
}
