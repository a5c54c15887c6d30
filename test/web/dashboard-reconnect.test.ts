/**
 * A task's page across a crash of the service (LMSP 7.3, 11.3, 15): while the service is down the
 * page says it is reconnecting rather than following live, and once the service is back on the
 * same address the page picks the stream up again after its last event, with no gap.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { NO_BROWSER, signIn, withBrowser } from '../helpers/browser.js';
import { waitFor, withService } from '../helpers/service.js';

describe('the dashboard across a crash of the service (LMSP 15)', { skip: NO_BROWSER ?? false }, () => {
  test('SIGKILL: the task page says it is reconnecting, then follows the resumed task to its end', { timeout: 150_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '30' } }, (service) => withBrowser(async (browser) => {
      const page = await browser.newPage();
      const client = await signIn(page, service, ['responses']);
      const created = (await client.createResponse({ model: 'lmsp-tiny', input: 'on and on', max_output_tokens: 300, background: true, seed: 11 })).body;
      await page.goto(`${service.url}/#/tasks/${created.task.id}`);
      const help = page.locator('#task-events + p.help');
      await help.filter({ hasText: 'Following live.' }).waitFor();
      await waitFor(async () => ((await page.getByTestId('output').textContent()) ?? '').length > 5 || undefined);

      await service.kill();
      await help.filter({ hasText: 'Reconnecting.' }).waitFor({ timeout: 15_000 });
      await page.getByText('The connection to the service was lost.').waitFor();

      const port = new URL(service.url).port;
      const again = await service.restart({ args: ['--port', port] });
      assert.equal(again.url, service.url);
      await help.filter({ hasText: 'The log is complete.' }).waitFor({ timeout: 90_000 });
      assert.equal(await page.getByText('The connection to the service was lost.').count(), 0, 'the notice goes once the stream is back');
      // The page's text is the response's, though it was followed across the crash.
      const response = await again.client.getResponse(created.id);
      assert.equal(response.status, 'incomplete');
      assert.equal(await page.getByTestId('output').textContent(), response.output[0]!.content[0]!.text);
      // Its log has every event once, in order.
      const numbers = (await page.locator('.log tbody tr td:first-child').allTextContents()).map(Number);
      assert.deepEqual(numbers, numbers.map((_, index) => numbers[0]! + index));
    })));

  test('a view opened while the service is down says so in words, and fills in by itself once it is back', { timeout: 120_000 }, () =>
    withService({}, (service) => withBrowser(async (browser) => {
      const page = await browser.newPage();
      await signIn(page, service, ['responses', 'admin']);
      const serviceId = (await service.client.service()).id;
      await page.goto(`${service.url}/#/tasks`);
      await page.getByRole('heading', { name: 'Tasks' }).waitFor();
      await service.kill();
      // The Overview's one-off read of the service fails now; the figures' polling too.
      await page.evaluate("location.hash = '#/'");
      await page.getByText('The service cannot be reached').first().waitFor({ timeout: 15_000 });
      assert.equal(await page.getByText('Failed to fetch').count(), 0, 'not the browser\'s words');
      const port = new URL(service.url).port;
      const again = await service.restart({ args: ['--port', port] });
      await page.getByText(serviceId).waitFor({ timeout: 30_000 });
      await waitFor(async () => (await page.getByText('The service cannot be reached').count()) === 0 || undefined, { what: 'the notice to go' });
      // A list view says so too, and recovers as well.
      await page.evaluate("location.hash = '#/tasks'");
      await page.getByRole('heading', { name: 'Tasks' }).waitFor();
      await again.kill();
      await page.getByText('The service cannot be reached').first().waitFor({ timeout: 15_000 });
    })));
});
