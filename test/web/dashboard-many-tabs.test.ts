/**
 * Many tabs of the dashboard on running tasks (LMSP 15): a browser opens at most 6 connections to
 * one site over HTTP/1.1 and a live stream holds one, so the tabs share a few places for live
 * streams and the others read their events every second. Every tab follows its task, and a tab
 * opened after them still gets its lists and its buttons.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import type { ResponseObject } from '../../src/api/types.js';
import { NO_BROWSER, signIn, withBrowser } from '../helpers/browser.js';
import { api, waitFor, withService } from '../helpers/service.js';

const TABS = 8;

async function openStreams(service: Parameters<typeof api>[0]): Promise<number> {
  const metrics = await (await api(service, '/metrics')).text();
  return Number(/^lmsp_open_streams (\d+)$/m.exec(metrics)?.[1]);
}

describe('the dashboard in many tabs (LMSP 15)', { skip: NO_BROWSER ?? false }, () => {
  test('eight task pages follow their running tasks; a ninth tab lists the tasks and can cancel', { timeout: 180_000 }, () =>
    withService({ args: ['--parallel', '1'], env: { LMSP_DEBUG_TOKEN_DELAY_MS: '100' } }, (service) => withBrowser(async (browser) => {
      const first = await browser.newPage();
      const client = await signIn(first, service, ['responses']);
      const session = await first.evaluate("sessionStorage.getItem('lmsp.session')") as string;
      // One task generates slowly; the others wait behind it in the queue: all stay unfinished.
      const created: ResponseObject[] = [];
      for (let index = 0; index < TABS; index += 1) {
        created.push((await client.createResponse({ model: 'lmsp-tiny', input: `story ${index}`, max_output_tokens: 400, background: true })).body);
      }
      // Each tab signed in as the first (the session lives in the tab's sessionStorage).
      const open = async (hash: string, page?: Page): Promise<Page> => {
        const tab = page ?? await browser.context.newPage();
        if (!page) {
          await tab.goto(`${service.url}/`);
          await tab.evaluate(`sessionStorage.setItem('lmsp.session', ${JSON.stringify(session)})`);
        }
        await tab.goto(`${service.url}/${hash}`);
        // A new URL that differs only in its hash loads nothing: the tab reads its session on a load.
        if (!page) await tab.reload();
        return tab;
      };
      const tabs: Page[] = [];
      for (const [index, response] of created.entries()) tabs.push(await open(`#/tasks/${response.task.id}`, index === 0 ? first : undefined));

      // Each page shows its task's summary and follows it: live, or read every second.
      for (const tab of tabs) {
        await tab.getByRole('button', { name: 'Cancel task' }).waitFor({ timeout: 20_000 });
        await tab.getByText(/Following(?: live\.|: new events are read every second)/).waitFor({ timeout: 20_000 });
      }
      assert.ok(await openStreams(service) <= 3, 'the tabs hold at most three live streams');
      // The running task's text reaches its page whether it holds a live stream or not.
      const running = await waitFor(async () => (await Promise.all(created.map((response) => service.client.getTask(response.task.id))))
        .findIndex((task) => task.status === 'running') + 1, { what: 'a running task' }) - 1;
      await waitFor(async () => ((await tabs[running]!.getByTestId('output').textContent()) ?? '').length > 20, { timeoutMs: 30_000, what: 'text on the running task\'s page' });

      // A ninth tab: its list answers, and a cancel from it goes through.
      const ninth = await open('#/tasks');
      await ninth.locator('table tbody tr').first().waitFor({ timeout: 15_000 });
      const last = created.at(-1)!;
      await ninth.goto(`${service.url}/#/tasks/${last.task.id}`);
      await ninth.getByRole('button', { name: 'Cancel task' }).click({ timeout: 15_000 });
      await waitFor(async () => (await service.client.getTask(last.task.id)).status === 'cancelled', { timeoutMs: 15_000, what: 'the cancel from the ninth tab' });
      // The page that follows that task sees it end, live or read every second.
      await tabs.at(-1)!.getByText('The log is complete.').waitFor({ timeout: 15_000 });
    })));
});
