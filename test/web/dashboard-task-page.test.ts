/**
 * A task's page as a person reads it (LMSP 6, 7.3, 15): the response's usage grows while the task
 * runs, the whole event log can be read back past the rows shown at first, and a task that does
 * not exist is said to be missing rather than followed; the task's client is named.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { axeViolations, NO_BROWSER, screenshot, signIn, withBrowser } from '../helpers/browser.js';
import { waitFor, withService } from '../helpers/service.js';

describe('the dashboard\'s task page (LMSP 15)', { skip: NO_BROWSER ?? false }, () => {
  test('usage read live while the task runs; every event reachable through "Show earlier events"; a missing task is only missing', { timeout: 150_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '25' } }, (service) => withBrowser(async (browser) => {
      const page = await browser.newPage();
      const client = await signIn(page, service, ['responses']);
      const created = (await client.createResponse({ model: 'lmsp-tiny', input: 'go on', max_output_tokens: 360, background: true, seed: 3 })).body;
      const owner = (await client.getTask(created.task.id)).client_id;
      await page.goto(`${service.url}/#/tasks/${created.task.id}`);
      const outputTokens = page.locator('xpath=//dt[normalize-space()="Output tokens"]/following-sibling::dd');
      const clientFact = (on: typeof page) => on.locator('xpath=//dt[normalize-space()="Client"]/following-sibling::dd');
      // The task's client by its name (this session's own), with its id.
      assert.equal(await clientFact(page).textContent(), `dashboard ${owner}`);
      // While the task still runs, the response panel shows more than the first tokens.
      await waitFor(async () => Number(await outputTokens.textContent()) > 40 || undefined, { what: 'output tokens growing on the page', timeoutMs: 30_000 });
      assert.ok((await client.getTask(created.task.id)).status === 'running', 'read while the task runs, not at its end');

      const help = page.locator('#task-events + p.help');
      await help.filter({ hasText: 'The log is complete.' }).waitFor({ timeout: 60_000 });
      const task = await client.getTask(created.task.id);
      assert.ok(task.last_sequence_number > 330, `${task.last_sequence_number} events: more than the page shows at first`);
      const numbers = async () => (await page.locator('.log tbody tr td:first-child').allTextContents()).map(Number);
      const shown = await numbers();
      assert.equal(shown.at(-1), task.last_sequence_number);
      assert.ok(shown[0]! > 1);
      await help.filter({ hasText: `from #${shown[0]} on are shown` }).waitFor();

      await screenshot(page, 'task-log-latest');
      const earlier = page.getByRole('button', { name: 'Show earlier events' });
      // One click at a time, each waited for: the button goes once the first event is shown.
      for (let first = shown[0]!; first > 1;) {
        await earlier.click();
        first = await waitFor(async () => {
          const now = (await numbers())[0]!;
          return now < first ? now : undefined;
        }, { what: 'earlier events in the log' });
      }
      assert.equal(await earlier.count(), 0, 'no button once the whole log is shown');
      assert.deepEqual(await numbers(), Array.from({ length: task.last_sequence_number }, (_, index) => index + 1), 'every event once, in order');
      assert.equal(await page.locator('.log tbody tr', { hasText: 'response.created' }).count(), 1);
      assert.deepEqual(await axeViolations(page), []);

      await page.goto(`${service.url}/#/tasks/task_doesnotexist000000000000000`);
      await page.getByText("No task with id 'task_doesnotexist000000000000000'.").waitFor();
      assert.equal(await page.getByText('Following live.').count(), 0);
      assert.equal(await page.getByRole('heading', { name: 'Event log' }).count(), 0);
      assert.equal(await page.getByRole('heading', { name: 'Output' }).count(), 0);
      await screenshot(page, 'task-missing');

      // An admin reads another client's task: that client's name, from the list of clients.
      const operator = await browser.newPage();
      await signIn(operator, service, ['admin'], 'operator');
      await operator.goto(`${service.url}/#/tasks/${created.task.id}`);
      await clientFact(operator).filter({ hasText: 'dashboard' }).waitFor();
      assert.equal(await clientFact(operator).textContent(), `dashboard ${owner}`);
    })));
});
